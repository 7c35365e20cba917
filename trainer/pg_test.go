package trainer

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
)

// stepClock is a fake clock on which waiting takes no real time: After
// moves the time on by the wait. A step on it lasts exactly the time the
// controller gives it, whatever this machine's CPU does.
type stepClock struct{ *clock.Fake }

func (c stepClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	c.Fake.Advance(d)
	return ch
}

// TestProgramGoodputOneBasis: the same step of the same model — the same
// batch, the same parameters — run by the controller's device with the
// tables on the caught-up slice and with them on parameter servers, on a
// clock where only the controller's own waits take time. Program goodput
// is ideal time over the time the step held the slice (MPG paper §4), on
// one basis in both placements (issue 27):
//
//   - the ideal is the same (the same FLOPs at TensorCore peak);
//   - each step holds the slice for its modelled device time, scaled: on
//     the slice TensorCore + SparseCore, on the servers TensorCore + the
//     wait on the servers, which the step-time model prices from the bytes
//     the step exchanged with them (steptime.Time.Servers) — the lookups
//     moved off the slice, and their time with them, and nothing else;
//   - so PG on the servers over PG on the slice is exactly (TensorCore +
//     SparseCore) / (TensorCore + wait on the servers), the only change.
//
// Before, the servers' step held the slice for its scaled TensorCore time
// plus the RPCs' real time — zero on this clock, a millisecond or two of
// loopback against scaled milliseconds of device time in a real run — so
// PG on the servers left the lookups' time out of its denominator (PG 1
// here) or counted it unscaled (bench/placement.sh reconstructs that basis).
func TestProgramGoodputOneBasis(t *testing.T) {
	ctx := context.Background()
	clk := stepClock{clock.NewFake(time.Unix(1e9, 0))}
	c := newHandController(t, clk)
	c.compile(ctx, 1, control.CaughtUp)
	if m := receive(t, c, control.EvCompiled); m.ev.Err != "" {
		t.Fatal(m.ev.Err)
	}
	state, err := c.dev.model.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	batch := pgBatch(c.feats, 256)

	// step runs batch on the device from the state, and returns its record
	// and the PG a goodput recorder computes from it.
	step := func(name string) (*stepResult, goodput.Summary) {
		t.Helper()
		if err := c.dev.model.UnmarshalBinary(state); err != nil {
			t.Fatal(err)
		}
		if c.dev.ps != nil {
			if err := c.dev.ps.Place(ctx, c.dev.model, nil); err != nil {
				t.Fatal(err)
			}
		}
		start := c.now()
		c.step(ctx, 1, c.dev.gen.Load(), batch, nil, start, false, false)
		r := receive(t, c, control.EvStepDone).step
		if r.err != nil || r.failed != "" {
			t.Fatalf("%s: %v %s", name, r.err, r.failed)
		}
		rec := goodput.NewRecorder(1, start)
		j := rec.Job(name)
		if err := j.Allocate(start, 1, 1); err != nil {
			t.Fatal(err)
		}
		if err := j.Step(r.start, r.end, r.ideal); err != nil {
			t.Fatal(err)
		}
		if err := j.CheckpointCommitted(r.end); err != nil {
			t.Fatal(err)
		}
		rep, err := rec.Report(r.end)
		if err != nil {
			t.Fatal(err)
		}
		return r, rep.Fleet
	}

	slice, slicePG := step("slice")
	c.dev.ps = startPGServers(t)
	servers, serversPG := step("servers")

	if slice.loss != servers.loss {
		t.Fatalf("not the same step: loss %v on the slice, %v on the servers", slice.loss, servers.loss)
	}
	dev := c.cfg.Device
	a, b := slice.time, servers.time
	t.Logf("slice:   TensorCore %v, SparseCore %v, servers %v, device %v; PG %.4f", a.TensorCore, a.SparseCore, a.Servers, a.Device, slicePG.PG)
	t.Logf("servers: TensorCore %v, SparseCore %v, servers %v, device %v; PG %.4f", b.TensorCore, b.SparseCore, b.Servers, b.Device, serversPG.PG)
	// The numerator: the same program.
	if slice.ideal != servers.ideal || slice.ideal != dev.Scale(a.TensorCore) || a.TensorCore != b.TensorCore {
		t.Fatalf("ideal %v on the slice, %v on the servers: the same step's FLOPs moved", slice.ideal, servers.ideal)
	}
	// What changed: the lookups left the SparseCore for the servers.
	if a.SparseCore <= 0 || a.Servers != 0 || b.SparseCore != 0 || b.Servers <= 0 ||
		a.Device != a.TensorCore+a.SparseCore || b.Device != b.TensorCore+b.Servers {
		t.Fatalf("modelled steps: slice %+v, servers %+v", a, b)
	}
	// The denominator: the time each step held the slice is its modelled
	// device time, scaled, in both placements.
	for _, s := range []*stepResult{slice, servers} {
		if held := s.end.Sub(s.start); held != dev.Scale(s.time.Device) {
			t.Errorf("the step held the slice %v, its scaled device time is %v", held, dev.Scale(s.time.Device))
		}
	}
	// So PG moves by that change only.
	want := float64(a.TensorCore+a.SparseCore) / float64(b.TensorCore+b.Servers)
	if got := serversPG.PG / slicePG.PG; math.Abs(got/want-1) > 1e-6 {
		t.Errorf("PG on the servers / on the slice = %.6f, want (TensorCore + SparseCore) / (TensorCore + wait on the servers) = %.6f", got, want)
	}
}

// pgBatch is n examples of c's features: one id per sparse input drawn from
// a few hundred rows, so that lookups are deduplicated as a real batch's.
func pgBatch(f model.Features, n int) *model.Examples {
	r := rand.New(rand.NewPCG(27, 3))
	ex := model.NewExamples(f)
	for i := range n {
		ex.EventIDs = append(ex.EventIDs, int64(i))
		ex.Labels = append(ex.Labels, float32(r.IntN(2)))
	}
	for k := range ex.Sparse {
		col := &ex.Sparse[k] // Offsets starts at [0]
		for range n {
			col.IDs = append(col.IDs, uint64(r.IntN(400)))
			col.Offsets = append(col.Offsets, int32(len(col.IDs)))
		}
	}
	for k := range ex.Dense {
		for range n {
			ex.Dense[k] = append(ex.Dense[k], float32(r.Float64()))
		}
	}
	return ex
}

// startPGServers starts two parameter servers in the test process (on
// loopback, admitting one token) and the job's connection to them.
func startPGServers(t *testing.T) *paramservers.Servers {
	t.Helper()
	const token = "pg-test-trainer-token"
	toks, err := auth.New([]auth.Entry{{Token: token, Principal: auth.Principal{Role: auth.RoleTrainer, Client: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	dir := t.TempDir()
	for i := range 2 {
		s, err := ps.NewServer(context.Background(), ps.Config{Shard: i, Shards: 2, Store: ps.DirStore{Dir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := ps.NewGRPCServer(s, toks)
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		addrs = append(addrs, lis.Addr().String())
	}
	st, err := paramservers.Start(context.Background(), paramservers.Config{Addrs: addrs, Token: token}, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
