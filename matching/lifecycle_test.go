package matching

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/ready"
)

// catalogVersions is a catalog of raw block versions for the lifecycle's
// tests: per block id, its versions oldest first.
type catalogVersions map[string][]block.Meta

func (c catalogVersions) Versions(source, id string) ([]block.Meta, error) {
	vs, ok := c[id]
	if !ok {
		return nil, ErrNotFound
	}
	return vs, nil
}

// blockVersions are three versions of block b: v1 as sealed, v2 a label
// update (click), v3 a feature update (query).
func blockVersions(id string) []block.Meta {
	key := func(v int64) string { return block.RawKey("ads", blockref.New(id, v)) }
	return []block.Meta{
		{ID: id, Source: "ads", Key: key(1)},
		{ID: id, Source: "ads", Key: key(2), Version: 2, ColumnVersions: map[string]int64{"click": 2}},
		{ID: id, Source: "ads", Key: key(3), Version: 3, ColumnVersions: map[string]int64{"click": 2, "query": 3}},
	}
}

// TestRawVersion: a memo entry is computed from the newest catalogued
// version holding its input version's data in the component's columns.
func TestRawVersion(t *testing.T) {
	cat := catalogVersions{"b": blockVersions("b")}
	for _, c := range []struct {
		columns []string
		memo    blockref.Memo
		want    int64 // raw version
		ok      bool
	}{
		{[]string{"query"}, blockref.NewMemo("b", 1), 2, true}, // the label update left query's data as it was
		{[]string{"query"}, blockref.NewMemo("b", 3), 3, true},
		{[]string{"query"}, blockref.NewMemo("b", 2), 3, false}, // no version has query at input version 2
		{[]string{"ad_title"}, blockref.NewMemo("b", 1), 3, true},
		{[]string{"click", "ad_title"}, blockref.NewMemo("b", 2), 3, true},
		{[]string{"click", "ad_title"}, blockref.NewMemo("b", 1), 1, true},
	} {
		m, ok, err := RawVersion(cat, "ads", c.memo, c.columns)
		if err != nil || ok != c.ok || m.Ref() != blockref.New("b", c.want) {
			t.Errorf("RawVersion(%s over %v) = %s %v %v, want version %d %v", c.memo, c.columns, m.Ref(), ok, err, c.want, c.ok)
		}
	}
	if _, _, err := RawVersion(cat, "ads", blockref.NewMemo("x", 1), nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown block: %v", err)
	}
}

type announcements []ready.Event

func (a *announcements) Publish(_ context.Context, e ready.Event) error {
	*a = append(*a, e)
	return nil
}

// TestDescribeAndComplete: a task is described from the entry and the
// catalog, and its completion marks exactly the incarnation described; a
// remote completion (no generation) is marked only when the object exists.
func TestDescribeAndComplete(t *testing.T) {
	f, _, clk := newTestFrontend(t, 2)
	res, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", Graph: mustParse(t, `input q = hash(col("query"), buckets=7)`), From: 0, To: 200})
	if err != nil {
		t.Fatal(err)
	}
	k := res.Solution.Inputs[0].Component
	objects := map[string]bool{}
	var ann announcements
	l := &Memos{Frontend: f, Clock: clk, Announce: &ann, Bucket: "sig",
		Versions: catalogVersions{"b000": blockVersions("b000")[:1], "b001": blockVersions("b001")},
		Stat: func(_ context.Context, key string) error {
			if !objects[key] {
				return errors.New("no such object")
			}
			return nil
		}}

	// b001's newest version changed query: the entry of input version 3.
	m := blockref.NewMemo("b001", 3)
	if _, err := f.Cache().UpdateMemo(k, m, func(e *MemoEntry, ok bool) bool {
		*e = newPending(k, m, clk.Now())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	spec, err := l.Describe(k, m)
	if err != nil || spec.Gen == 0 || spec.Raw != blockref.New("b001", 3) || spec.RawObject != "raw/ads/b001.v3.arrow" ||
		spec.MemoObject != block.MemoKey(k, m) || spec.DSL == "" {
		t.Fatalf("Describe(%s) = %+v, %v", m, spec, err)
	}
	// A stale generation is refused, the described one marks the entry.
	if err := l.Complete(context.Background(), k, m, spec.Gen+1, Completion{Rows: 10, Bytes: 80}); !errors.Is(err, ErrStale) {
		t.Fatalf("completing another incarnation: %v, want ErrStale", err)
	}
	if err := l.Complete(context.Background(), k, m, spec.Gen, Completion{Rows: 10, Bytes: 80, Build: "abc123 go1.26 linux/amd64 v1"}); err != nil {
		t.Fatal(err)
	}
	// The entry records the build that computed it (issue 27), kept in
	// the store, until it is invalidated.
	if e, _ := f.Cache().Memo(k, m); e.State != MemoReady || e.Rows != 10 || e.Build != "abc123 go1.26 linux/amd64 v1" {
		t.Fatalf("entry after completion: %+v", e)
	}
	if len(ann) != 1 || ann[0].ComponentKey != k || ann[0].Block != m || ann[0].Key != spec.MemoObject || ann[0].Bucket != "sig" {
		t.Fatalf("announced %+v", ann)
	}
	// Nothing left to compute once ready.
	if spec, err := l.Describe(k, m); err != nil || spec.Gen != 0 {
		t.Fatalf("Describe of a ready entry: gen %d, %v", spec.Gen, err)
	}

	// A remote completion of b000: refused until the object exists.
	m0 := blockref.NewMemo("b000", 1)
	if spec, err := l.Describe(k, m0); err != nil || spec.Gen == 0 || spec.Raw != blockref.New("b000", 1) {
		t.Fatalf("Describe(%s) = %+v, %v", m0, spec, err)
	}
	if err := l.Complete(context.Background(), k, m0, 0, Completion{Rows: 5}); err == nil {
		t.Fatal("a remote completion without its object was accepted")
	}
	objects[block.MemoKey(k, m0)] = true
	if err := l.Complete(context.Background(), k, m0, 0, Completion{Rows: 5}); err != nil {
		t.Fatal(err)
	}
	if e, _ := f.Cache().Memo(k, m0); e.State != MemoReady || e.Build != "" {
		t.Fatalf("entry after a remote completion without a build: %+v", e)
	}
	e, _ := f.Cache().Memo(k, m)
	if after, err := f.Invalidate(k, m, e.Gen, "wrong"); err != nil || after.Build != "" {
		t.Fatalf("invalidated entry %+v, %v: want its build forgotten with its incarnation", after, err)
	}

	// An entry whose data no catalogued version holds has nothing to
	// compute.
	gone := blockref.NewMemo("b001", 2)
	if _, err := f.Cache().UpdateMemo(k, gone, func(e *MemoEntry, ok bool) bool {
		*e = newPending(k, gone, clk.Now())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if spec, err := l.Describe(k, gone); err != nil || spec.Gen != 0 {
		t.Fatalf("Describe of an entry no version holds: gen %d, %v", spec.Gen, err)
	}
}

// TestDescribeMemoInputsEveryNodeKind (issue 27): a task's memo inputs are
// the ready memo nodes of its cone whatever their kind — a node constant
// folding made (truncate of a truncate), a node with two users — except a
// bare column: memoized as `input dev = col("device")`'s whole component,
// it is not a memo input of `hash(col("device"), buckets=16)`, whose
// worker reads the column from the raw block (Describe says why).
func TestDescribeMemoInputsEveryNodeKind(t *testing.T) {
	f, _, clk := newTestFrontend(t, 1)
	ctx := context.Background()
	l := &Memos{Frontend: f, Clock: clk, Versions: catalogVersions{"b000": blockVersions("b000")[:1]}}
	m := blockref.NewMemo("b000", 1)
	submit := func(pipeline, src string) map[string]canon.Key {
		t.Helper()
		res, err := f.Submit(SubmitRequest{Client: "c", Pipeline: pipeline, Graph: mustParse(t, src), From: 0, To: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]canon.Key{}
		for _, in := range res.Solution.Inputs {
			out[in.Name] = in.Component
		}
		return out
	}
	// describe returns the task's memo inputs; complete marks its entry
	// ready as a worker's completion does.
	describe := func(k canon.Key) []MemoInput {
		t.Helper()
		spec, err := l.Describe(k, m)
		if err != nil || spec.Gen == 0 {
			t.Fatalf("Describe(%s): gen %d, %v", k.Short(), spec.Gen, err)
		}
		return spec.MemoInputs
	}
	complete := func(k canon.Key) {
		t.Helper()
		spec, err := l.Describe(k, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, k, m, spec.Gen, Completion{Rows: 100, Bytes: 800}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(expr string) canon.Key {
		t.Helper()
		k, _, err := canon.KeyOf(expr, transform.AdsSchema(), transform.Default())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	want := func(name string, got []MemoInput, keys ...canon.Key) {
		t.Helper()
		var ws []MemoInput
		for _, k := range keys {
			ws = append(ws, MemoInput{Key: k, Object: block.MemoKey(k, m)})
		}
		if !slices.Equal(got, ws) {
			t.Errorf("%s: memo inputs %v, want %v", name, got, ws)
		}
	}

	first := submit("first", `
input dev = col("device")
input tok3 = truncate(truncate(unigrams(lower(col("query"))), max=8), max=3)
input low = lower(col("ad_title"))
`)
	for _, k := range first {
		complete(k)
	}
	folded := key(`truncate(unigrams(lower(col("query"))), max=3)`)
	if first["tok3"] != folded || first["dev"] != key(`col("device")`) {
		t.Fatalf("components %v: tok3 is not the folded truncate or dev not the bare column", first)
	}
	second := submit("second", `
input ok = hash(col("device"), buckets=16)
input devs = cross(col("device"), hash(col("device"), buckets=16), buckets=97)
input h = hash(truncate(truncate(unigrams(lower(col("query"))), max=8), max=3), buckets=16)
input twice = concat(unigrams(lower(col("ad_title"))), ngrams(lower(col("ad_title")), n=2))
`)
	want("ok (over the memoized bare column)", describe(second["ok"]))
	want("h (over the folded node)", describe(second["h"]), folded)
	want("twice (over a node with two users)", describe(second["twice"]), first["low"])
	// The column has two users in devs; the hash above it, memoized as
	// ok's component, is devs's memo input, the column still is not.
	want("devs before ok is ready", describe(second["devs"]))
	complete(second["ok"])
	want("devs", describe(second["devs"]), second["ok"])
}
