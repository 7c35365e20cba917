package ps

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	psv1 "github.com/sigdata/sig/proto/ps/v1"
)

// TestAssignReadBack moves tables trained elsewhere onto 3 servers, stacked
// and cyclically distributed (what a trainer does at its switch to the
// caught-up phase): every row reads back bit for bit, through ReadTables
// and through a step's Lookup; the servers are at the assigned step, a
// checkpoint of it restores the assigned values after more updates, and
// Adagrad's accumulators restart.
func TestAssignReadBack(t *testing.T) {
	ctx := context.Background()
	tables := testTables()
	dir := t.TempDir()
	cl := startCluster(t, 3, []Store{DirStore{Dir: dir}, DirStore{Dir: dir}, DirStore{Dir: dir}})
	c, err := NewClient(ctx, cl.conns, ClientConfig{Tables: tables, Stacking: true, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Some updates first: Assign must overwrite them and their accumulators.
	for step := 1; step <= 2; step++ {
		b, g := genStep(tables, 2, step)
		f, err := c.Lookup(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, f, g); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([][]float32, len(tables))
	for i, tb := range tables {
		for range tb.Vocab * int64(tb.Dim) {
			want[i] = append(want[i], float32(rng.NormFloat64()))
		}
	}
	if err := c.Assign(ctx, 40, want); err != nil {
		t.Fatal(err)
	}
	if c.Step() != 40 {
		t.Fatalf("client at step %d after Assign(40)", c.Step())
	}
	got, err := c.ReadTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameBits(got, want); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := sameBits(readAll(t, c, 2), want); err != nil {
		t.Fatalf("looked up: %v", err)
	}
	for i, s := range cl.servers {
		if s.Step() != 40 {
			t.Fatalf("server %d at step %d", i, s.Step())
		}
	}
	// The next step is 41, and applies to the assigned values with fresh
	// accumulators: the reference starts from them.
	l, _ := NewLayout(tables, false, 1)
	ref := newReference(l)
	for i := range ref.w {
		copy(ref.w[i], want[i])
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	b, g := genStep(tables, 2, 41)
	f, err := c.Lookup(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, f, g); err != nil {
		t.Fatal(err)
	}
	ref.step(b, g)
	if err := sameBits(readAll(t, c, 2), readAllRef(ref)); err != nil {
		t.Fatalf("step 41 after Assign: %v", err)
	}
	if err := c.Restore(ctx, 40); err != nil {
		t.Fatal(err)
	}
	if got, err = c.ReadTables(ctx); err != nil {
		t.Fatal(err)
	} else if err := sameBits(got, want); err != nil {
		t.Fatalf("restored to the assigned step: %v", err)
	}

	// Bad assignments are refused, naming what is wrong.
	s := cl.servers[0]
	for _, req := range []*psv1.AssignRequest{
		{Step: -1},
		{Step: 1, Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{0}, Values: []float32{1}},       // 1 float for a width-8 row
		{Step: 1, Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{1}, Values: make([]float32, 8)}, // row 1 is on shard 1
		{Step: 1, Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{0}, Values: nanRow(8)},          // not finite
		{Step: 1, Variables: []int32{9}, Counts: []uint32{1}, Rows: []int64{0}, Values: make([]float32, 8)}, // no variable 9
	} {
		if _, err := s.Assign(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("assign %v: %v, want InvalidArgument", req, err)
		}
	}
	if s.Step() != 40 {
		t.Fatalf("a refused assign moved the step to %d", s.Step())
	}
	if err := c.Assign(ctx, 1, want[:2]); err == nil {
		t.Fatal("Assign took values of 2 tables for 7")
	}
}

func nanRow(d int) []float32 {
	r := make([]float32, d)
	r[3] = float32(math.NaN())
	return r
}
