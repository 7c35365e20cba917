package ps

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	psv1 "github.com/sigdata/sig/proto/ps/v1"
)

// testTables mixes widths and optimizers: with stacking, t0/t2/t5 (width 8,
// Adagrad) share a variable, t1/t4 (width 16, SGD) another, t3 and t6 stay
// alone (t6 has t0's width but another learning rate).
func testTables() []Table {
	ada := func(name string, vocab int64, dim int, lr float32) Table {
		return Table{Name: name, Vocab: vocab, Dim: dim, Optimizer: Adagrad, LearningRate: lr, InitialAccumulator: 0.1, InitScale: 0.05, InitSeed: 7}
	}
	sgd := func(name string, vocab int64, dim int) Table {
		return Table{Name: name, Vocab: vocab, Dim: dim, Optimizer: SGD, LearningRate: 0.05, InitScale: 0.05, InitSeed: 7}
	}
	return []Table{ada("t0", 97, 8, 0.1), sgd("t1", 50, 16), ada("t2", 13, 8, 0.1), sgd("t3", 200, 4), sgd("t4", 31, 16), ada("t5", 64, 8, 0.1), ada("t6", 40, 8, 0.2)}
}

// cluster is n in-process servers on loopback gRPC.
type cluster struct {
	servers []*Server
	grpcs   []*grpc.Server
	conns   []grpc.ClientConnInterface
}

func startCluster(t testing.TB, n int, stores []Store) *cluster {
	t.Helper()
	c := &cluster{}
	for i := range n {
		var st Store
		if stores != nil {
			st = stores[i]
		}
		s, err := NewServer(context.Background(), Config{Shard: i, Shards: n, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := NewGRPCServer(s, nil)
		go g.Serve(lis)
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close(); g.Stop() })
		c.servers, c.grpcs, c.conns = append(c.servers, s), append(c.grpcs, g), append(c.conns, cc)
	}
	return c
}

func (c *cluster) stats() (lookups, applies int64) {
	for _, s := range c.servers {
		st := s.Stats()
		lookups += st.LookupRPCs
		applies += st.ApplyRPCs
	}
	return lookups, applies
}

// genStep makes step's batch and gradients, the same for every mode: each
// core looks up Zipf-distributed rows (so rows repeat within and across
// cores) and gets gradients of a few bits of precision less than float32.
func genStep(tables []Table, cores int, step int) (Batch, Grads) {
	rng := rand.New(rand.NewPCG(uint64(step), 99))
	b := make(Batch, cores)
	g := make(Grads, cores)
	for c := range cores {
		b[c] = make([][]int64, len(tables))
		g[c] = make([][]float32, len(tables))
		for t, tb := range tables {
			z := rand.NewZipf(rng, 1.2, 1, uint64(tb.Vocab-1))
			n := rng.IntN(12)
			for range n {
				b[c][t] = append(b[c][t], int64(z.Uint64()))
			}
			for range n * tb.Dim {
				g[c][t] = append(g[c][t], float32(rng.NormFloat64()))
			}
		}
	}
	return b, g
}

// reference is the parameter servers' arithmetic written plainly: every
// table a dense matrix; per step, each row's gradient is the sum over cores
// in core order of the sum over the core's positions in position order,
// starting from zero; then SGD or Adagrad in float32.
type reference struct {
	tables []Table
	w, acc [][]float32
}

func newReference(l *Layout) *reference {
	r := &reference{tables: l.Tables}
	for t, tb := range l.Tables {
		w := make([]float32, 0, tb.Vocab*int64(tb.Dim))
		for row := range tb.Vocab {
			w = append(w, l.InitialRow(t, row)...)
		}
		acc := make([]float32, len(w))
		for i := range acc {
			acc[i] = tb.InitialAccumulator
		}
		r.w, r.acc = append(r.w, w), append(r.acc, acc)
	}
	return r
}

func (r *reference) step(b Batch, g Grads) {
	for t, tb := range r.tables {
		d := tb.Dim
		sum := map[int64][]float32{}
		var order []int64
		for c := range b {
			core := map[int64][]float32{}
			var corder []int64
			for i, row := range b[c][t] {
				if core[row] == nil {
					core[row] = make([]float32, d)
					corder = append(corder, row)
				}
				for e := range d {
					core[row][e] += g[c][t][i*d+e]
				}
			}
			for _, row := range corder {
				if sum[row] == nil {
					sum[row] = make([]float32, d)
					order = append(order, row)
				}
				for e := range d {
					sum[row][e] += core[row][e]
				}
			}
		}
		for _, row := range order {
			w := r.w[t][row*int64(d) : (row+1)*int64(d)]
			a := r.acc[t][row*int64(d) : (row+1)*int64(d)]
			for e := range d {
				gr := sum[row][e]
				if tb.Optimizer == SGD {
					w[e] -= float32(tb.LearningRate * gr)
				} else {
					a[e] += gr * gr
					w[e] -= tb.LearningRate * gr / float32(math.Sqrt(float64(a[e])))
				}
			}
		}
	}
}

// readAll reads every row of every table through the client (core 0 looks
// everything up; the other cores nothing).
func readAll(t testing.TB, cl *Client, cores int) [][]float32 {
	t.Helper()
	T := len(cl.Layout().Tables)
	b := make(Batch, cores)
	for c := range b {
		b[c] = make([][]int64, T)
	}
	for tb := range T {
		for r := range cl.Layout().Tables[tb].Vocab {
			b[0][tb] = append(b[0][tb], r)
		}
	}
	f, err := cl.Lookup(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, T)
	for tb := range T {
		for i := range b[0][tb] {
			out[tb] = append(out[tb], f.Value(0, tb, i)...)
		}
	}
	return out
}

// sameBits reports the first difference between two embedding sets.
func sameBits(a, b [][]float32) error {
	for t := range a {
		if len(a[t]) != len(b[t]) {
			return fmt.Errorf("table %d: %d floats vs %d", t, len(a[t]), len(b[t]))
		}
		for i := range a[t] {
			if math.Float32bits(a[t][i]) != math.Float32bits(b[t][i]) {
				return fmt.Errorf("table %d float %d: %v vs %v", t, i, a[t][i], b[t][i])
			}
		}
	}
	return nil
}

// TestModesGiveIdenticalEmbeddings runs the same updates through coalesced
// and uncoalesced clients, with and without table stacking, over 3 servers
// and 4 TPU cores, and requires bit-identical embeddings in all four and in
// the plain reference. It also counts the RPCs each server serves per step:
// one Lookup and one Apply coalesced, cores × tables of each uncoalesced
// (paper V.B).
func TestModesGiveIdenticalEmbeddings(t *testing.T) {
	const servers, cores, steps = 3, 4, 8
	tables := testTables()
	ctx := context.Background()
	var results [][][]float32
	var names []string
	for _, stacking := range []bool{false, true} {
		for _, mode := range []Mode{Coalesced, Uncoalesced} {
			cl := startCluster(t, servers, nil)
			c, err := NewClient(ctx, cl.conns, ClientConfig{Tables: tables, Stacking: stacking, Mode: mode, Cores: cores})
			if err != nil {
				t.Fatal(err)
			}
			if stacking && len(c.Layout().Variables) != 4 {
				t.Fatalf("stacking: %d variables, want 4", len(c.Layout().Variables))
			}
			for step := 1; step <= steps; step++ {
				b, g := genStep(tables, cores, step)
				l0, a0 := cl.stats()
				f, err := c.Lookup(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Apply(ctx, f, g); err != nil {
					t.Fatal(err)
				}
				l1, a1 := cl.stats()
				want := int64(servers)
				if mode == Uncoalesced {
					want = int64(servers * cores * len(tables))
				}
				if l1-l0 != want || a1-a0 != want {
					t.Fatalf("%v: step %d: %d lookups and %d applies over %d servers, want %d each", mode, step, l1-l0, a1-a0, servers, want)
				}
			}
			if c.Step() != steps {
				t.Fatalf("client at step %d, want %d", c.Step(), steps)
			}
			for _, s := range cl.servers {
				if s.Step() != steps {
					t.Fatalf("server at step %d, want %d", s.Step(), steps)
				}
			}
			results = append(results, readAll(t, c, cores))
			names = append(names, fmt.Sprintf("%v stacking=%v", mode, stacking))
		}
	}
	l, _ := NewLayout(tables, false, 1)
	ref := newReference(l)
	initial := readAllRef(ref)
	for step := 1; step <= steps; step++ {
		ref.step(genStep(tables, cores, step))
	}
	want := readAllRef(ref)
	if sameBits(initial, want) == nil {
		t.Fatal("the updates changed nothing")
	}
	for i, got := range results {
		if err := sameBits(got, want); err != nil {
			t.Fatalf("%s differs from the reference: %v", names[i], err)
		}
	}
}

func readAllRef(r *reference) [][]float32 {
	out := make([][]float32, len(r.w))
	for t := range r.w {
		out[t] = append([]float32(nil), r.w[t]...)
	}
	return out
}

// TestValueIsAView checks the zero-copy split: two positions of one row in
// one core's batch share the same memory, and a coalesced response's rows
// are slices of one buffer.
func TestValueIsAView(t *testing.T) {
	cl := startCluster(t, 2, nil)
	ctx := context.Background()
	tables := testTables()
	c, err := NewClient(ctx, cl.conns, ClientConfig{Tables: tables, Mode: Coalesced, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := make(Batch, 2)
	for i := range b {
		b[i] = make([][]int64, len(tables))
	}
	b[0][0] = []int64{4, 6, 4}
	b[1][0] = []int64{6}
	b[1][2] = []int64{2} // another table, same variable with stacking off: another segment
	f, err := c.Lookup(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if &f.Value(0, 0, 0)[0] != &f.Value(0, 0, 2)[0] {
		t.Fatal("two positions of one row are not one view")
	}
	if &f.Value(0, 0, 1)[0] != &f.Value(1, 0, 0)[0] {
		t.Fatal("one row looked up by two cores arrived twice")
	}
	// Rows 4 and 6 are on shard 0, adjacent in its packet: the second view
	// starts one row (8 floats) after the first, in the same buffer.
	a, d := f.Value(0, 0, 0), f.Value(0, 0, 1)
	if uintptr(unsafe.Pointer(&d[0]))-uintptr(unsafe.Pointer(&a[0])) != 8*4 {
		t.Fatal("rows of one packet are not views of one buffer")
	}
	l, _ := NewLayout(tables, false, 2)
	for _, p := range []struct {
		core, t, i int
		row        int64
	}{{0, 0, 0, 4}, {0, 0, 1, 6}, {1, 2, 0, 2}} {
		if err := sameBits([][]float32{f.Value(p.core, p.t, p.i)}, [][]float32{l.InitialRow(p.t, p.row)}); err != nil {
			t.Fatalf("row %d of table %d: %v", p.row, p.t, err)
		}
	}
}

// TestCheckpointRestore checkpoints a shard set, keeps training, then starts
// new servers on the same stores: they come back at the checkpoint's step
// with exactly the reference's embeddings at that step (no committed update
// lost, none after it applied), Restore rolls back to an older retained
// checkpoint, and replaying the lost steps gives the uninterrupted run's
// embeddings bit for bit (so optimizer state was restored too).
func TestCheckpointRestore(t *testing.T) {
	const servers, cores = 2, 3
	ctx := context.Background()
	tables := testTables()
	dir := t.TempDir()
	stores := []Store{DirStore{Dir: dir}, DirStore{Dir: dir}}
	cl := startCluster(t, servers, stores)
	c, err := NewClient(ctx, cl.conns, ClientConfig{Tables: tables, Stacking: true, Mode: Coalesced, Cores: cores})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := NewLayout(tables, false, 1)
	ref := newReference(l)
	snap := map[int64][][]float32{0: readAllRef(ref)}
	run := func(c *Client, from, to int) {
		for step := from; step <= to; step++ {
			b, g := genStep(tables, cores, step)
			f, err := c.Lookup(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Apply(ctx, f, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	for step := 1; step <= 7; step++ {
		ref.step(genStep(tables, cores, step))
		snap[int64(step)] = readAllRef(ref)
	}
	run(c, 1, 3)
	if s, err := c.Checkpoint(ctx); err != nil || s != 3 {
		t.Fatalf("checkpoint: %d, %v", s, err)
	}
	run(c, 4, 5)
	if s, err := c.Checkpoint(ctx); err != nil || s != 5 {
		t.Fatalf("checkpoint: %d, %v", s, err)
	}
	run(c, 6, 7)
	if err := sameBits(readAll(t, c, cores), snap[7]); err != nil {
		t.Fatalf("before the restart: %v", err)
	}

	// "Restart": new servers on the same stores.
	cl2 := startCluster(t, servers, stores)
	c2, err := NewClient(ctx, cl2.conns, ClientConfig{Tables: tables, Stacking: true, Mode: Uncoalesced, Cores: cores})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Step() != 5 {
		t.Fatalf("restored at step %d, want 5", c2.Step())
	}
	if err := sameBits(readAll(t, c2, cores), snap[5]); err != nil {
		t.Fatalf("restored shard differs from step 5: %v", err)
	}
	st, err := c2.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st[1].GetCheckpoints(); len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Fatalf("retained checkpoints %v, want [3 5]", got)
	}
	// Roll back to 3 and replay: the uninterrupted run's embeddings.
	if err := c2.Restore(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := sameBits(readAll(t, c2, cores), snap[3]); err != nil {
		t.Fatalf("after Restore(3): %v", err)
	}
	run(c2, 4, 7)
	if err := sameBits(readAll(t, c2, cores), snap[7]); err != nil {
		t.Fatalf("after replaying 4..7: %v", err)
	}
	// A step the server has not reached is refused, a retried one acknowledged.
	_, err = cl2.servers[0].Apply(ctx, &psv1.ApplyRequest{Step: 9, Parts: 1})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("apply of step 9 at step 7: %v, want FailedPrecondition", err)
	}
	r, err := cl2.servers[0].Apply(ctx, &psv1.ApplyRequest{Step: 6, Parts: 1})
	if err != nil || r.GetStep() != 7 {
		t.Fatalf("retry of step 6: %v, %v", r, err)
	}
	if err := c2.Restore(ctx, 1); status.Code(err) != codes.NotFound {
		t.Fatalf("restore of a checkpoint never written: %v, want NotFound", err)
	}
}

// TestCorruptCheckpointFails flips a byte of a checkpoint: the server
// refuses to start rather than serve wrong embeddings.
func TestCorruptCheckpointFails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cl := startCluster(t, 1, []Store{DirStore{Dir: dir}})
	c, err := NewClient(ctx, cl.conns, ClientConfig{Tables: testTables(), Cores: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "shard-0-of-1", "step-000000000000.bin")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(ctx, Config{Shard: 0, Shards: 1, Store: DirStore{Dir: dir}}); err == nil {
		t.Fatal("a server started from a corrupt checkpoint")
	}
}

// TestBadRequests: packets naming rows of another shard or out of range,
// mismatched lengths, a different configuration, a wrong shard count.
func TestBadRequests(t *testing.T) {
	ctx := context.Background()
	cl := startCluster(t, 2, nil)
	s := cl.servers[1]
	if _, err := s.Lookup(ctx, &psv1.LookupRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("lookup before configure: %v", err)
	}
	tables := testTables()
	if _, err := NewClient(ctx, cl.conns, ClientConfig{Tables: tables, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	for _, req := range []*psv1.LookupRequest{
		{Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{2}},    // row 2 is on shard 0
		{Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{99}},   // past the vocabulary
		{Variables: []int32{0}, Counts: []uint32{2}, Rows: []int64{1}},    // counts exceed rows
		{Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{1, 3}}, // rows exceed counts
		{Variables: []int32{42}, Counts: []uint32{0}},
	} {
		if _, err := s.Lookup(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("lookup %v: %v, want InvalidArgument", req, err)
		}
	}
	if _, err := s.Apply(ctx, &psv1.ApplyRequest{Step: 1, Parts: 1, Variables: []int32{0}, Counts: []uint32{1}, Rows: []int64{1}, Grads: []float32{1}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("apply with too few gradient floats: %v", err)
	}
	if s.Step() != 0 {
		t.Fatal("a refused apply moved the step")
	}
	other := testTables()
	other[0].LearningRate = 1
	if _, err := NewClient(ctx, cl.conns, ClientConfig{Tables: other, Cores: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("reconfiguring with other tables: %v, want FailedPrecondition", err)
	}
	if _, err := NewClient(ctx, cl.conns[:1], ClientConfig{Tables: tables, Cores: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a client expecting 1 shard: %v, want FailedPrecondition", err)
	}
}
