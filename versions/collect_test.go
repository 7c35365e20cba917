package versions_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

// catalogBlocks is the catalog as the matching frontend sees it (as
// sigd's adapter).
type catalogBlocks struct{ cat *catalog.Catalog }

func (c catalogBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	ms, err := c.cat.Range(source, from, to)
	out := make([]matching.Block, len(ms))
	for i, m := range ms {
		out[i] = matching.BlockOf(m)
	}
	return out, err
}

type noQueue struct{}

func (noQueue) Enqueue(canon.Key, blockref.Memo, string, string, int32) error { return nil }

// collectFrontend is the matching frontend in the catalog's terms, as
// sigd's adapter.
type collectFrontend struct{ f *matching.Frontend }

func (c collectFrontend) BlockChanged(source string, m block.Meta) (matching.Invalidation, error) {
	return c.f.BlockChanged(source, matching.BlockOf(m))
}

func (c collectFrontend) DropVersions(source string, removed, live []block.Meta) ([]matching.MemoEntry, error) {
	toBlocks := func(ms []block.Meta) []matching.Block {
		out := make([]matching.Block, len(ms))
		for i, m := range ms {
			out[i] = matching.BlockOf(m)
		}
		return out
	}
	return c.f.DropVersions(source, toBlocks(removed), toBlocks(live))
}

func (c collectFrontend) Unnamed(removed []matching.MemoEntry) ([]string, error) {
	return c.f.Cache().Unnamed(removed)
}

// TestCollectDeletesPackWithItsLastEntry (issue 28): version GC deletes
// the memo objects of the entries no kept version reads, but a pack only
// once no entry names it. Block b's version 1 has the entries of A and C
// (reading query) and B (reading bid_price) in packs P1 = {A, B} and
// P3 = {C}; version 2 changes query. Collecting version 1 drops A's and
// C's version-1 entries and deletes P3 and the raw version 1, and keeps
// P1, where B's entry, which version 2 still reads, is ready. Before, every
// dropped entry's object was deleted, P1 with it, and B's ready entry named
// a deleted object.
func TestCollectDeletesPackWithItsLastEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalog.Open(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	cache, err := matching.OpenCache(filepath.Join(dir, "cache"), matching.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	st := memstore.New()
	put := func(key string) {
		t.Helper()
		if _, err := st.Put(ctx, key, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	const hour = int64(3600_000_000)
	kr := block.KafkaRange{Topic: "raw.ads", First: 0, Last: 9}
	id := block.ID(hour, kr)
	v1 := block.Meta{Format: 1, Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads", WindowStart: hour, WindowLength: hour,
		MinEventTime: hour, MaxEventTime: 2*hour - 1, Rows: 10, SchemaFingerprint: "fp", Kafka: &kr}
	if err := cat.Add(v1); err != nil {
		t.Fatal(err)
	}
	put(v1.Key)
	f := matching.NewFrontend(matching.FrontendConfig{Cache: cache, Blocks: catalogBlocks{cat}, Scheduler: noQueue{},
		Insertion: insertion.Config{MemoizeAll: true},
		Schema:    func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil }})
	g, err := transform.Parse([]byte(`
input a = hash(col("query"), buckets=7)
input b = bucketize(col("bid_price"), boundaries=[1.0])
input c = length(unigrams(col("query")))
`), "", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Submit(matching.SubmitRequest{Client: "c", Pipeline: "p", Graph: g, From: hour, To: 2 * hour})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]canon.Key{}
	for _, in := range res.Solution.Inputs {
		keys[in.Name] = in.Component
	}
	memos := &matching.Memos{Frontend: f}
	complete := func(pack string, names ...string) {
		t.Helper()
		put(pack)
		var ms []matching.Member
		for _, n := range names {
			k := keys[n]
			es, _ := cache.Memos(k)
			for m, e := range es {
				if e.State == matching.MemoPending {
					ms = append(ms, matching.Member{Component: k, Block: m, Gen: e.Gen, Completion: matching.Completion{Rows: 10, Bytes: 80}})
				}
			}
		}
		marked, err := memos.CompletePack(ctx, pack, ms)
		if err != nil || len(marked) != len(names) || slices.Contains(marked, false) {
			t.Fatalf("completing %v into %s: %v, %v", names, pack, marked, err)
		}
	}
	p1 := block.PackKey("ads", v1.Ref(), "p1")
	p3 := block.PackKey("ads", v1.Ref(), "p3")
	complete(p1, "a", "b")
	complete(p3, "c")

	// Version 2 changes query: a and c get entries at input version 2.
	v2 := v1.Clone()
	v2.Version, v2.Key, v2.ColumnVersions = 2, block.RawKey("ads", blockref.New(id, 2)), map[string]int64{"query": 2}
	v2.Changes = []block.Change{{Version: 2, Topic: "raw.ads", First: 10, Last: 10, UpdatedRows: 1, Columns: []string{"query"}}}
	if err := cat.Add(v2); err != nil {
		t.Fatal(err)
	}
	put(v2.Key)
	m := versions.New(versions.Options{Catalog: cat, Frontend: collectFrontend{f}, Store: st, GCGrace: -1})
	if _, err := m.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	complete(block.PackKey("ads", v2.Ref(), "p2"), "a", "c")

	gc, err := m.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gc.Versions != 1 || gc.MemoEntries != 2 || gc.Objects != 2 {
		t.Errorf("collected %+v: want version 1, the entries of a and c, and two objects (the raw version and P3)", gc)
	}
	exists := func(key string) bool {
		_, err := st.Stat(ctx, key)
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if exists(p3) || exists(v1.Key) {
		t.Errorf("P3 or raw version 1 left: %t, %t", exists(p3), exists(v1.Key))
	}
	b, err := cache.Memo(keys["b"], blockref.NewMemo(id, 1))
	if err != nil || b.State != matching.MemoReady || b.Object != p1 {
		t.Fatalf("b's entry after GC: %+v, %v", b, err)
	}
	if !exists(p1) {
		t.Fatalf("P1 was deleted while b's ready entry names it")
	}
}
