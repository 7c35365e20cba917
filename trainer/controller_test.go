package trainer

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// newHandController returns a controller whose checkpoints go to a fresh
// MinIO, with a small model and no sigd: the test drives it by hand (no Run
// loop), feeding its machine and executing the actions it cares about.
func newHandController(t *testing.T, clk clock.Clock) *Controller {
	t.Helper()
	mi := devenv.NewMinIO(t)
	st, err := objstore.New(objstore.Config{Endpoint: mi.Endpoint, AccessKey: mi.AccessKey, SecretKey: mi.SecretKey, Bucket: "sig", RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := NewController(ControllerConfig{Client: "c", Pipeline: "p", SIG: sigv1.NewSIGClient(nil), Store: st,
		Clock: clk, StatusInterval: -1, GoodputJournalInterval: -1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := model.NewFeatures([]model.Input{{Name: "ad", Type: transform.Int64}, {Name: "price", Type: transform.Float64}})
	if err != nil {
		t.Fatal(err)
	}
	if c.dev.model, err = model.New(c.modelConfig(f)); err != nil {
		t.Fatal(err)
	}
	c.feats, c.featsOK = f, true
	return c
}

// b1 is the one unit of the hand-driven tests: block b1 as first sealed.
var b1 = blockref.New("b1", 1)

// testBatch is a batch of two examples of unit b1 (event ids 1 and 2).
func testBatch(f model.Features) *pendingBatch {
	ex := model.NewExamples(f)
	ex.EventIDs, ex.Labels = []int64{1, 2}, []float32{1, 0}
	ex.Sparse[0] = model.SparseColumn{Offsets: []int32{0, 1, 2}, IDs: []uint64{3, 4}}
	ex.Dense[0] = []float32{0.5, -0.5}
	return &pendingBatch{ex: ex, segs: []buffer.Segment{{Unit: b1, Rows: 2}}}
}

// feed hands events to c's machine (at the clock's time) and executes the
// actions that only touch the controller's state; it returns all of them.
func feed(c *Controller, evs ...control.Event) []control.Action {
	var out []control.Action
	for _, ev := range evs {
		ev.At = c.now()
		for _, a := range c.m.Handle(ev) {
			switch a.Kind {
			case control.ActStartAttempt, control.ActAbort, control.ActBroadcastPreempt, control.ActExit:
				c.execute(c.ctx, ev.At, a)
			}
			out = append(out, a)
		}
	}
	return out
}

// toStep brings c's machine to the run-step of attempt 1: one host h0, one
// unit b1 of two rows, and the action's batch stored as the controller
// stores a host's; before the batch comes, notice (if set) is fed.
func toStep(t *testing.T, c *Controller, notice *control.Event) control.Action {
	t.Helper()
	feed(c, control.Event{Kind: control.EvStart}, control.Event{Kind: control.EvSetupDone}, control.Event{Kind: control.EvRestored},
		control.Event{Kind: control.EvBlocks, Blocks: []control.Block{{Ref: b1, Ready: true}}},
		control.Event{Kind: control.EvChipsGranted}, control.Event{Kind: control.EvModelRestored}, control.Event{Kind: control.EvCompiled},
		control.Event{Kind: control.EvHostJoined, Host: "h0", Incarnation: "1"},
		control.Event{Kind: control.EvUnitsRequested, Host: "h0", Attempt: 1, Max: 1},
		control.Event{Kind: control.EvUnitRead, Host: "h0", Attempt: 1, Unit: b1, Rows: 2})
	if notice != nil {
		feed(c, *notice)
	}
	c.payloads[hostSeq{host: "h0", attempt: 1, seq: 0}] = testBatch(c.feats)
	acts := feed(c, control.Event{Kind: control.EvBatch, Host: "h0", Attempt: 1, Seq: 0, Examples: 2, UnitRows: map[blockref.Ref]int64{b1: 2}, Final: true})
	for _, a := range acts {
		if a.Kind == control.ActRunStep {
			return a
		}
	}
	t.Fatalf("no step: %v; %s", acts, c.m.Describe())
	return control.Action{}
}

// toCheckpoint goes on from toStep as if the step trained ids into the
// attempt's ledger, and returns the write-checkpoint action.
func toCheckpoint(t *testing.T, c *Controller, notice *control.Event, ids []int64) control.Action {
	t.Helper()
	toStep(t, c, notice)
	c.attemptLedger.Unit(b1).Add(ids)
	for _, a := range feed(c, control.Event{Kind: control.EvStepDone, Attempt: 1}) {
		if a.Kind == control.ActWriteCheckpoint {
			return a
		}
	}
	t.Fatalf("no checkpoint: %s", c.m.Describe())
	return control.Action{}
}

func receive(t *testing.T, c *Controller, kind control.EventKind) msg {
	t.Helper()
	select {
	case m := <-c.inbox:
		if m.ev.Kind != kind {
			t.Fatalf("got %s, want %s", m.ev.Kind, kind)
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", kind)
	}
	return msg{}
}

// TestCheckpointDurableBeforeDeadline: a checkpoint whose manifest became
// durable before a job-wide preemption deadline commits the preempted epoch
// even when the controller gets to the news after the deadline has passed.
func TestCheckpointDurableBeforeDeadline(t *testing.T) {
	clk := clock.NewFake(time.Now())
	c := newHandController(t, clk)
	notice := control.Event{Kind: control.EvPreempt, Deadline: clk.Now().Add(10 * time.Second)}
	a := toCheckpoint(t, c, &notice, []int64{1, 2})
	c.writeCheckpoint(c.ctx, c.now(), a)
	m := receive(t, c, control.EvCheckpointDone)
	if m.ev.Err != "" {
		t.Fatal(m.ev.Err)
	}
	// The run loop was busy: the deadline passes before it handles the news.
	clk.Advance(20 * time.Second)
	c.handle(m)
	if c.exit == nil || c.exit.reason != "preempted" || !c.exit.committed {
		t.Fatalf("exit %+v, want preempted and committed (%s)", c.exit, c.m.Describe())
	}
	if p := c.m.Committed(); p.Epochs != 1 {
		t.Fatalf("committed %+v", p)
	}
}

// TestStaleStepAfterRestore: a step of an aborted attempt that gets the
// device only after the model was restored from the checkpoint must not
// train its batch into the restored model (the retry trains it again).
func TestStaleStepAfterRestore(t *testing.T) {
	c := newHandController(t, clock.Real{})
	ctx := context.Background()
	state, err := c.dev.model.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	man, err := c.cks.Save(ctx, checkpoint.Checkpoint{Job: "p", Progress: control.Progress{Epochs: 1, Units: []blockref.Ref{blockref.New("b0", 1)}},
		Fingerprint: c.dev.model.Fingerprint(), Model: state, Ledger: &checkpoint.Ledger{}, Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// The step of attempt 1 is decided; before it gets the device the
	// attempt fails and the restore takes the device first.
	c.dev.mu.Lock()
	go c.restoreModel(ctx, &man, control.Initial)
	time.Sleep(100 * time.Millisecond) // the restore waits for the device first
	a := toStep(t, c, nil)
	c.runStep(ctx, a)
	time.Sleep(100 * time.Millisecond)
	c.dev.mu.Unlock()
	if m := receive(t, c, control.EvModelRestored); m.ev.Err != "" {
		t.Fatal(m.ev.Err)
	}
	receive(t, c, control.EvStepDone)
	c.dev.mu.Lock()
	got, err := c.dev.model.MarshalBinary()
	c.dev.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, state) {
		t.Fatal("the aborted attempt's step trained into the restored model")
	}
}

// TestRunStepMissingBatch: a step whose batch is not there fails the
// attempt instead of running on what is.
func TestRunStepMissingBatch(t *testing.T) {
	c := newHandController(t, clock.Real{})
	a := toStep(t, c, nil)
	clear(c.payloads)
	c.runStep(c.ctx, a)
	m := receive(t, c, control.EvStepDone)
	c.stepDone(c.now(), m.step, &m.ev)
	feed(c, m.ev)
	if c.m.Attempt() != 0 || len(c.failures) != 1 || !strings.Contains(c.failures[0], "batch") {
		t.Fatalf("attempt %d, failures %q: %s", c.m.Attempt(), c.failures, c.m.Describe())
	}
}

// TestCheckpointLedgerRows: the attempt's ledger must hold exactly the rows
// each unit was read with, or nothing is committed.
func TestCheckpointLedgerRows(t *testing.T) {
	c := newHandController(t, clock.Real{})
	a := toCheckpoint(t, c, nil, []int64{1}) // b1 has two rows
	c.writeCheckpoint(c.ctx, c.now(), a)
	m := receive(t, c, control.EvCheckpointDone)
	if !strings.Contains(m.ev.Err, "ledger") {
		t.Fatalf("checkpoint of a short ledger: err %q", m.ev.Err)
	}
	if man, err := c.cks.Latest(c.ctx); err != nil || man != nil {
		t.Fatalf("committed %+v %v", man, err)
	}
}

// TestHostIDJobReserved: a host may not be named after the job's
// preemption scope, control.ScopeJob: a notice for that host would stop the
// whole job. The session is refused before the host joins.
func TestHostIDJobReserved(t *testing.T) {
	c := newHandController(t, clock.Real{})
	gs := c.GRPCServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, id := range []string{control.ScopeJob, "h 1"} {
		// The controller runs no loop here: a session it accepted would
		// wait forever, so a refusal must come before the host joins.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := trainerv1.NewControllerClient(conn).Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_Hello{Hello: &trainerv1.Hello{HostId: id, Incarnation: "i1"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "host_id") {
			t.Errorf("host_id %q: got %v, want InvalidArgument naming host_id", id, err)
		}
	}
}
