package reader

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// countingReader records the reads a server makes: each request's object
// and byte range.
type countingReader struct {
	objstore.Reader
	mu    sync.Mutex
	reads []readRange
}

type readRange struct {
	key      string
	off, end int64
}

func (c *countingReader) add(key string, off, end int64) {
	c.mu.Lock()
	c.reads = append(c.reads, readRange{key, off, end})
	c.mu.Unlock()
}

// take returns the reads since the last call.
func (c *countingReader) take() []readRange {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.reads
	c.reads = nil
	return out
}

func (c *countingReader) GetRangeInto(ctx context.Context, key string, off int64, dst []byte, filled func(lo, hi int)) error {
	c.add(key, off, off+int64(len(dst)))
	return c.Reader.GetRangeInto(ctx, key, off, dst, filled)
}

func (c *countingReader) GetFromInto(ctx context.Context, key string, off, max int64, alloc func(int) []byte, filled func(lo, hi int)) ([]byte, objstore.Info, error) {
	b, info, err := c.Reader.GetFromInto(ctx, key, off, max, alloc, filled)
	c.add(key, off, off+int64(len(b)))
	return b, info, err
}

func (c *countingReader) GetSuffixInto(ctx context.Context, key string, dst []byte) (int, objstore.Info, error) {
	n, info, err := c.Reader.GetSuffixInto(ctx, key, dst)
	c.add(key, info.Size-int64(n), info.Size)
	return n, info, err
}

// countingServer is a server of f's store whose reads c records.
func countingServer(t *testing.T, f *fixture, cfg Config) (*Server, *countingReader) {
	t.Helper()
	c := &countingReader{Reader: f.store}
	cfg.Store = c
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// perObject counts reads by object.
func perObject(reads []readRange) map[string]int {
	out := map[string]int{}
	for _, r := range reads {
		out[r.key]++
	}
	return out
}

// TestUnitRequests: a unit reads each object it needs with one request, in
// the common case (fetch.go). A raw block of a few thousand rows is one
// request whether its footer is cached (the coalesced range of its
// columns, the footer read back along) or not (the tail read holds the
// whole object); a memo object of one component is one request either
// way; several inputs whose columns are in one memo object share its one
// request, so a unit of k such inputs is two; Config.ExactAlignment
// fetches each memo object's event ids in the same request. Every unit
// streams the bytes of LIG. The server's counters (MetricObjectRequests)
// agree with the store.
func TestUnitRequests(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 3000, Nulls: true, Graphs: fleetGraphs(t, "ctr_small")})
	ctx := context.Background()
	if f.blocks[0].meta.Size > block.TailRead {
		t.Fatalf("raw block of %d bytes, more than a tail read", f.blocks[0].meta.Size)
	}
	lig, err := collect(ctx, f.server(t, Config{}), &readerv1.ReadRequest{Unit: f.unit(0, 1000, allMode(local))})
	if err != nil {
		t.Fatal(err)
	}
	// shared: three inputs of the first input's component, as three
	// inputs whose columns a packed object holds.
	shared := f.unit(0, 1000, allMode(memo))
	for i, in := range shared.Inputs {
		c := proto.CloneOf(shared.Inputs[0])
		c.Name = in.Name
		shared.Inputs[i] = c
	}
	sharedLIG := f.unit(0, 1000, allMode(local))
	sharedLIG.Inputs = nil
	for _, in := range shared.Inputs {
		c := proto.CloneOf(in)
		c.Mode = local
		sharedLIG.Inputs = append(sharedLIG.Inputs, c)
	}
	sharedWant, err := collect(ctx, f.server(t, Config{}), &readerv1.ReadRequest{Unit: sharedLIG})
	if err != nil {
		t.Fatal(err)
	}
	raw := f.blocks[0].meta.Key
	for _, tc := range []struct {
		name string
		cfg  Config
		unit *readerv1.WorkUnit
		want []*readerv1.ReadResponse
		// objects: requests per object read, first read and again.
		objects int
	}{
		{"memo objects of one component", Config{}, f.unit(0, 1000, allMode(memo)), lig, 1 + len(f.inputs)},
		{"exact alignment", Config{ExactAlignment: true}, f.unit(0, 1000, allMode(memo)), lig, 1 + len(f.inputs)},
		{"inputs sharing one object", Config{}, shared, sharedWant, 2},
		{"LIG", Config{}, f.unit(0, 1000, allMode(local)), lig, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := countingServer(t, f, tc.cfg)
			var wanted0 struct{ Raw, Memo int64 }
			for _, again := range []bool{false, true} {
				before, wantedBefore := s.Stats().ObjectRequests, s.Stats().WantedBytes
				got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: tc.unit})
				if err != nil {
					t.Fatal(err)
				}
				sameResponses(t, tc.name, got, "LIG", tc.want)
				reads := c.take()
				if len(reads) != tc.objects || s.Stats().ObjectRequests-before != int64(tc.objects) {
					t.Errorf("read again %v: %d requests (counted %d), want %d: %v", again, len(reads), s.Stats().ObjectRequests-before, tc.objects, reads)
				}
				for key, n := range perObject(reads) {
					if n != 1 {
						t.Errorf("read again %v: %d requests of %s, want 1", again, n, key)
					}
				}
				if perObject(reads)[raw] != 1 {
					t.Errorf("read again %v: the raw block was not read with one request: %v", again, reads)
				}
				// The wanted bytes (MetricObjectWantedBytes) are the
				// segments the unit needed: some of every object read,
				// never more than the store sent, the same on every read.
				var fetched struct{ Raw, Memo int64 }
				for _, r := range reads {
					if r.key == raw {
						fetched.Raw += r.end - r.off
					} else {
						fetched.Memo += r.end - r.off
					}
				}
				w := s.Stats().WantedBytes
				w.Raw, w.Memo = w.Raw-wantedBefore.Raw, w.Memo-wantedBefore.Memo
				if w.Raw <= 0 || w.Raw > fetched.Raw || w.Memo > fetched.Memo || (w.Memo == 0) != (fetched.Memo == 0) {
					t.Errorf("read again %v: wanted bytes %+v, fetched %+v: want some of each object read and at most what was fetched", again, w, fetched)
				}
				if again && w != wanted0 {
					t.Errorf("wanted bytes %+v read again, %+v the first time", w, wanted0)
				}
				wanted0 = w
			}
			if st := s.Stats().Footers; st.Hits == 0 || st.Stale != 0 {
				t.Errorf("footer cache %+v: want hits on the second read and nothing stale", st)
			}
		})
	}
}

// TestFooterCacheSavesRequests: the raw block of a unit larger than the
// tail read takes the tail read and the ranges before it the first time;
// read again, its footer cached, only the ranges. Without a footer cache
// every read is the first.
func TestFooterCacheSavesRequests(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 30_000, Graphs: fleetGraphs(t, "ctr_small")})
	ctx := context.Background()
	if f.blocks[0].meta.Size < 2*block.TailRead {
		t.Fatalf("raw block of %d bytes: not larger than a tail read", f.blocks[0].meta.Size)
	}
	raw := f.blocks[0].meta.Key
	rawRequests := func(s *Server, c *countingReader) int {
		t.Helper()
		if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 4096, allMode(memo))}); err != nil {
			t.Fatal(err)
		}
		return perObject(c.take())[raw]
	}
	s, c := countingServer(t, f, Config{})
	first, again := rawRequests(s, c), rawRequests(s, c)
	if again >= first {
		t.Errorf("raw block: %d requests the first time, %d again with its footer cached: want fewer", first, again)
	}
	s, c = countingServer(t, f, Config{FooterCacheEntries: -1})
	if n, m := rawRequests(s, c), rawRequests(s, c); n != first || m != first {
		t.Errorf("without a footer cache: %d and %d requests, want %d both times", n, m, first)
	}
}

// TestGuardReadsRawColumnsOnce: the guard's raw columns are read with the
// unit's other raw columns, once per unit, however many inputs it guards:
// no byte of the raw block is requested twice in a unit, the guarded
// unit's raw block is one request as the unguarded one's is, and the
// ranges cover every column the guarded components read.
func TestGuardReadsRawColumnsOnce(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 3000, Nulls: true, Graphs: fleetGraphs(t, "ctr_small", "cvr")})
	ctx := context.Background()
	raw := f.blocks[0].meta
	u := f.unit(0, 1000, allMode(memo))
	for _, guard := range []int{-1, 0, 1024} {
		s, c := countingServer(t, f, Config{GuardSampleRows: guard})
		for range 2 {
			if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); err != nil {
				t.Fatal(err)
			}
			var ranges []readRange
			for _, r := range c.take() {
				if r.key == raw.Key {
					ranges = append(ranges, r)
				}
			}
			if len(ranges) != 1 {
				t.Errorf("guard %d: %d requests of the raw block, want 1: %v", guard, len(ranges), ranges)
			}
			slices.SortFunc(ranges, func(a, b readRange) int { return int(a.off - b.off) })
			for i := 1; i < len(ranges); i++ {
				if ranges[i].off < ranges[i-1].end {
					t.Errorf("guard %d: bytes [%d, %d) of the raw block requested twice", guard, ranges[i].off, ranges[i-1].end)
				}
			}
			if guard < 0 {
				continue
			}
			for _, in := range f.inputs {
				for _, col := range in.columns {
					c, _ := raw.Column(col)
					if !slices.ContainsFunc(ranges, func(r readRange) bool { return r.off <= c.Offset && c.Offset+c.Length <= r.end }) {
						t.Errorf("guard %d: column %s of input %s was not read", guard, col, in.name)
					}
				}
			}
		}
		if s.guardMetrics.rows.Load() == 0 && guard >= 0 {
			t.Errorf("guard %d checked no rows", guard)
		}
	}
}

// TestStaleRawFooter: a raw block written again under its key after a
// reader cached its footer (which block objects never are; the reader
// must not serve wrong rows if one were) with its rows reversed. The memo
// objects, written for the old rows, are no longer row-aligned with it:
// a reader whose memo reads trusted the cached footer's event_id segment
// (block.SameSegment) would serve them against the new rows; instead the
// stale footer is dropped, the unit is read again, the memo event ids are
// compared, and the unit fails DataLoss, not row-aligned. (The guard is
// off: its sampled rows would catch the misaligned values too.) Reading
// the old bytes again gives the old responses.
func TestStaleRawFooter(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 3000, Graphs: fleetGraphs(t, "ctr_small")})
	ctx := context.Background()
	s := f.server(t, Config{GuardSampleRows: -1})
	u := f.unit(0, 1000, allMode(memo))
	want, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
	if err != nil {
		t.Fatal(err)
	}
	key := f.blocks[0].meta.Key
	old, _, err := f.store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m, rec, err := block.ReadBlock(ctx, f.store, key)
	if err != nil {
		t.Fatal(err)
	}
	rev := reverseRows(t, rec)
	rec.Release()
	defer rev.Release()
	m.Columns, m.Size, m.FooterOffset, m.FooterLength, m.Checksum = nil, 0, 0, 0, 0
	if _, err := block.Write(ctx, f.store, m, rev); err != nil {
		t.Fatal(err)
	}
	stale := s.Stats().Footers.Stale
	_, err = collect(ctx, s, &readerv1.ReadRequest{Unit: u})
	if st := Status(err); st.Code() != codes.DataLoss || !strings.Contains(st.Message(), "not row-aligned") {
		t.Fatalf("memo objects of other rows than the raw block's: %v, want DataLoss, not row-aligned", err)
	}
	if s.Stats().Footers.Stale == stale {
		t.Fatal("the stale raw footer was not noticed")
	}
	if _, err := f.store.Put(ctx, key, old, nil); err != nil {
		t.Fatal(err)
	}
	got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
	if err != nil {
		t.Fatal(err)
	}
	sameResponses(t, "restored", got, "before", want)
}

// reverseRows returns rec with its rows in reverse order.
func reverseRows(t *testing.T, rec arrow.Record) arrow.Record {
	t.Helper()
	n := int(rec.NumRows())
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		parts := make([]arrow.Array, n)
		for r := range n {
			parts[r] = array.NewSlice(rec.Column(i), int64(n-1-r), int64(n-r))
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	out := array.NewRecord(rec.Schema(), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}
