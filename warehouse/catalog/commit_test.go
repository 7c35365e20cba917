package catalog_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

// catalogState is everything a reader of the catalog can see: the blocks
// of each source at their newest versions, a block's superseded versions,
// the Kafka coverage, the sources, the snapshot and the change feed.
type catalogState struct {
	Blocks   map[string][]block.Meta
	Versions []block.Meta
	Covered  map[int32][]catalog.Coverage
	Sources  []string
	Snapshot int64
	Changed  []block.Meta
	Next     int64
}

func stateOf(t *testing.T, c *catalog.Catalog, versionsOf string) catalogState {
	t.Helper()
	s := catalogState{Blocks: map[string][]block.Meta{}, Covered: map[int32][]catalog.Coverage{}}
	var err error
	if s.Sources, err = c.Sources(); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"ads", "clicks"} {
		if s.Blocks[src], err = c.Blocks(src); err != nil {
			t.Fatal(err)
		}
	}
	if s.Versions, err = c.Versions("ads", versionsOf); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if s.Covered[p], err = c.Covered("raw.ads", p); err != nil {
			t.Fatal(err)
		}
	}
	if s.Snapshot, err = c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if s.Changed, s.Next, err = c.ChangedSince(0, 0); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCommitAllOrNothing: a Commit with one meta the catalog refuses
// (invalid, or conflicting with the catalog or the rest of the batch)
// commits none of the batch, though the metas before it were good and had
// been checked and staged: no block, version, history entry, coverage,
// source, sequence number or feed entry of theirs is visible. Ingestion
// relies on it: a change buffer's new block and versions become visible
// together or not at all (warehouse/ingest), and a refused batch is
// retried whole. The good metas then commit as a batch of their own.
func TestCommitAllOrNothing(t *testing.T) {
	w := 100 * hour
	a := meta(w, 0, 0, 99, 1)
	for _, tc := range []struct {
		name string
		bad  func(a block.Meta) block.Meta
		want error // nil: an error, of no particular kind
	}{
		{"invalid meta", func(a block.Meta) block.Meta {
			m := meta(w, 2, 0, 9, 1)
			m.Rows = -1
			return m
		}, nil},
		{"no window length", func(a block.Meta) block.Meta {
			m := meta(w, 2, 0, 9, 1)
			m.WindowLength = 0
			return m
		}, nil},
		{"window length other than its source's", func(a block.Meta) block.Meta {
			m := meta(w, 2, 0, 9, 1)
			m.WindowLength = 2 * hour
			return m
		}, catalog.ErrConflict},
		{"version gap", func(a block.Meta) block.Meta {
			return next(next(next(a, 500, 501, 1), 502, 503, 1), 504, 505, 1)
		}, catalog.ErrConflict},
		{"second version of a block in the batch", func(a block.Meta) block.Meta {
			return next(next(a, 200, 210, 1, "click"), 506, 507, 1)
		}, nil},
		{"overlap with the catalog", func(a block.Meta) block.Meta { return meta(w, 0, 50, 60, 1) }, catalog.ErrOverlap},
		{"version 1 over the batch's version 2", func(a block.Meta) block.Meta { return meta(w, 0, 0, 99, 2) }, catalog.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, t.TempDir())
			defer c.Close()
			if err := c.Add(a); err != nil {
				t.Fatal(err)
			}
			// Good on their own: a new block, a version of a (moving
			// version 1 to the history, covering its change's span),
			// a block of a new source.
			x := meta(w+hour, 0, 100, 199, 1)
			a2 := next(a, 200, 210, 1, "click")
			y := meta(w, 1, 0, 9, 1)
			y.Source = "clicks"
			good := []block.Meta{x, a2, y}
			before := stateOf(t, c, a.ID)
			err := c.Commit(append(good, tc.bad(a)))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Commit: %v, want an error (%v)", err, tc.want)
			}
			if after := stateOf(t, c, a.ID); !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused Commit (%v) changed the catalog:\n%+v\nwas\n%+v", err, after, before)
			}
			// The refused batch left nothing behind that refuses its
			// good part (a coverage entry, a version).
			if err := c.Commit(good); err != nil {
				t.Fatalf("the good metas after the refusal: %v", err)
			}
			got := stateOf(t, c, a.ID)
			if vs := versionsOf(got.Versions); !reflect.DeepEqual(vs, []int64{1, 2}) || len(got.Blocks["clicks"]) != 1 ||
				got.Snapshot != before.Snapshot+3 || len(got.Changed) != 3 {
				t.Fatalf("after committing the good metas: versions %v, %d clicks blocks, snapshot %d (was %d), %d changed",
					vs, len(got.Blocks["clicks"]), got.Snapshot, before.Snapshot, len(got.Changed))
			}
		})
	}
}
