package versions_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/compact"
)

// failing is the matching frontend (a real one, on a real cache, with no
// pipeline: it makes no entry) recording the versions passed to it, and
// failing once for the version named by failOn, as a cache write can.
type failing struct {
	f      *matching.Frontend
	got    []string
	failOn string
}

func (w *failing) BlockChanged(source string, m block.Meta) (matching.Invalidation, error) {
	name := fmt.Sprintf("%s@%d", m.ID, m.Ref().Version())
	if name == w.failOn {
		w.failOn = ""
		return matching.Invalidation{}, errors.New("injected failure")
	}
	w.got = append(w.got, name)
	return w.f.BlockChanged(source, matching.BlockOf(m))
}

func (w *failing) DropVersions(string, []block.Meta, []block.Meta) ([]matching.MemoEntry, error) {
	return nil, errors.New("not collected here")
}

func (w *failing) Unnamed([]matching.MemoEntry) ([]string, error) {
	return nil, errors.New("not collected here")
}

func (w *failing) SweepingPacks(fn func() error) error { return fn() }

// TestFollowResumesFromItsPosition: Follow passes each block's newest
// version once, in sequence order, page by page, skipping new blocks and
// versions superseded before it saw them; it stores its position as it
// goes, so a Manager started anew (a restart) resumes there, and after a
// failure it resumes at the version that failed, never after it.
func TestFollowResumesFromItsPosition(t *testing.T) {
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
	fe := &failing{f: matching.NewFrontend(matching.FrontendConfig{Cache: cache})}
	start := func() *versions.Manager {
		return versions.New(versions.Options{Catalog: cat, Frontend: fe, PageSize: 2})
	}
	follow := func(m *versions.Manager, want []string, wantErr bool) {
		t.Helper()
		fe.got = nil
		n, err := m.Follow(ctx)
		if (err != nil) != wantErr || n != len(want) || !reflect.DeepEqual(fe.got, want) {
			t.Fatalf("Follow passed %v (%d), err %v; want %v, error %v", fe.got, n, err, want, wantErr)
		}
	}

	const hour = int64(3600_000_000)
	blocks := map[string]block.Meta{}
	commit := func(name string, cols ...string) string {
		t.Helper()
		m, ok := blocks[name]
		if !ok {
			kr := block.KafkaRange{Topic: "raw.ads", Partition: int32(len(blocks)), First: 0, Last: 9}
			id := block.ID(hour, kr)
			m = block.Meta{Format: 1, Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads", WindowStart: hour, WindowLength: hour,
				MinEventTime: hour, MaxEventTime: 2*hour - 1, Rows: 10, SchemaFingerprint: "fp", Kafka: &kr}
		} else {
			v := m.Ref().Version() + 1
			m = m.Clone()
			m.Version, m.Key = v, block.RawKey("ads", blockref.New(m.ID, v))
			if m.ColumnVersions == nil {
				m.ColumnVersions = map[string]int64{}
			}
			for _, c := range cols {
				m.ColumnVersions[c] = v
			}
			m.Changes = append(m.Changes, block.Change{Version: v, Topic: "raw.ads", Partition: m.Kafka.Partition,
				First: 10 + v, Last: 10 + v, UpdatedRows: 1, Columns: cols})
		}
		if err := cat.Add(m); err != nil {
			t.Fatal(err)
		}
		m, err := cat.Get("ads", m.ID) // with its sequence number
		if err != nil {
			t.Fatal(err)
		}
		blocks[name] = m
		return fmt.Sprintf("%s@%d", m.ID, m.Ref().Version())
	}
	commit("a")
	commit("b")
	commit("c")
	a2, b2, c2 := commit("a", "click"), commit("b", "bid_price"), commit("c", "query")

	// b@2 fails: a@2 is done and stored, b@2 and c@2 are not.
	fe.failOn = b2
	follow(start(), []string{a2}, true)
	if p, _ := cat.Position(versions.PositionName); p != blocks["b"].Seq-1 {
		t.Fatalf("stored position %d after a failure at b@2 (seq %d)", p, blocks["b"].Seq)
	}
	// A restart resumes at b@2.
	m := start()
	follow(m, []string{b2, c2}, false)
	follow(m, nil, false)
	follow(start(), nil, false)

	// A new block is not passed; of a block changed twice, only the
	// newest version is.
	commit("d")
	commit("b", "click")
	b4 := commit("b", "bid_price")
	a3 := commit("a", "click")
	follow(m, []string{b4, a3}, false)
	snap, _ := cat.Snapshot()
	if p, _ := cat.Position(versions.PositionName); p != snap || m.Position() != snap {
		t.Fatalf("position %d (stored) %d (Position), want the snapshot %d", p, m.Position(), snap)
	}
	follow(start(), nil, false)
}

// TestFollowSkipsCompaction: a compaction (issue 28) makes a new block and
// ends its parts with tombstone versions; Follow passes none of them (a
// tombstone has no rows for an entry to read), and stores its position
// past them.
func TestFollowSkipsCompaction(t *testing.T) {
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
	fe := &failing{f: matching.NewFrontend(matching.FrontendConfig{Cache: cache})}
	m := versions.New(versions.Options{Catalog: cat, Frontend: fe})
	const hour = int64(3600_000_000)
	var parts []block.Meta
	for i := range int64(3) {
		kr := block.KafkaRange{Topic: "raw.ads", First: 10 * i, Last: 10*i + 9}
		id := block.ID(hour, kr)
		p := block.Meta{Format: 1, Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads", WindowStart: hour, WindowLength: hour,
			MinEventTime: hour, MaxEventTime: 2*hour - 1, Rows: 10, SchemaFingerprint: "fp", Kafka: &kr,
			Columns: []block.Column{{Name: "event_id", Type: "int64"}}}
		if err := cat.Add(p); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if _, err := m.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := compact.Meta(parts, 2)
	if err != nil {
		t.Fatal(err)
	}
	c.Rows, c.Columns, c.MinEventTime, c.MaxEventTime = 30, parts[0].Columns, hour, 2*hour-1
	if err := cat.Compact(c); err != nil {
		t.Fatal(err)
	}
	fe.got = nil
	if n, err := m.Follow(ctx); err != nil || n != 0 || len(fe.got) != 0 {
		t.Fatalf("Follow after a compaction passed %v (%d), %v; want nothing", fe.got, n, err)
	}
	if snap, _ := cat.Snapshot(); m.Position() != snap {
		t.Fatalf("position %d, snapshot %d", m.Position(), snap)
	}
}
