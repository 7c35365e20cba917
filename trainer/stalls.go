package trainer

import (
	"context"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/stall"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The stall ledger wired in (issue 30; trainer/accounting/stall): what
// this controller process waited on, and why, against the input stall
// goodput measured.
//
//   - SIG side: when the machine stalls on a pending block (ActStall,
//     control's "Stalls on SIG"), a wait per pending input of the block
//     opens (from the solution), and while the stall lasts the
//     controller asks sigd every ExplainInterval why the block's entries
//     are not ready (ExplainPending): each answer is an explanation, an
//     entry it names and no wait covers opens one, an open wait sigd no
//     longer names (its entry became ready) closes. ActStallEnd closes
//     them all.
//   - Reader side: hosts report the waits of their units' reads
//     (ReaderWait: fetch, send, unavailable; host.go).
//
// The ledger is computed when asked (report, status, metrics) from these
// and the job's input-stall intervals.

// stallRecorder holds the waits and explanations. Hosts' session
// goroutines, the explainer and the run loop write it: mu guards it.
type stallRecorder struct {
	mu    sync.Mutex
	waits []stall.Wait
	// open are the controller's open SIG-side waits, by (component, block).
	open map[[2]string]int
	exps []stall.Explanation
	// stalled: since when the machine stalls on block (zero: it does not).
	block   blockref.Ref
	since   time.Time
	answers int
	cancel  context.CancelFunc
}

// maxStallRecords bounds the waits and explanations one controller
// keeps (a long job stalls many times); the oldest go first, and the
// stall they covered is then unrecorded.
const maxStallRecords = 100000

func (r *stallRecorder) trim() {
	if n := len(r.waits) - maxStallRecords; n > 0 && len(r.open) == 0 {
		r.waits = slices.Delete(r.waits, 0, n)
	}
	if n := len(r.exps) - maxStallRecords; n > 0 {
		r.exps = slices.Delete(r.exps, 0, n)
	}
}

// readerWait records a host's wait on its reader.
func (r *stallRecorder) readerWait(host string, w *trainerv1.ReaderWait) error {
	kind, err := stall.ParseKind(w.GetKind())
	if err != nil || !kind.Reader() {
		return status.Errorf(codes.InvalidArgument, "reader_wait.kind: %q is not a reader-side cause", w.GetKind())
	}
	start, end := w.GetStart().AsTime(), w.GetEnd().AsTime()
	if w.GetStart() == nil || w.GetEnd() == nil || end.Before(start) {
		return status.Error(codes.InvalidArgument, "reader_wait: start and end are required, start first")
	}
	ref := blockref.Parse(w.GetUnitId())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, stall.Wait{Start: start, End: end, Who: host, Unit: ref.String(),
		Component: ref.String(), Block: ref.ID(), Kind: kind})
	r.trim()
	return nil
}

// beginStall: the machine stalls on block (ActStall).
func (c *Controller) beginStall(ctx context.Context, now time.Time, block blockref.Ref) {
	r := &c.stalls
	r.mu.Lock()
	r.closeAll(now)
	r.block, r.since, r.answers = block, now, 0
	if c.sol != nil {
		for i, in := range c.sol.sol.GetInputs() {
			if in.GetComputed() {
				continue // its memo nodes: sigd's answer names them
			}
			if b := c.sol.memo[i][block.ID()]; b != nil && b.GetState() != sigv1.BlockState_BLOCK_STATE_READY {
				r.openWait(now, block, in.GetInput(), in.GetCanonicalDsl())
			}
		}
	}
	if len(r.open) == 0 {
		r.openWait(now, block, "", "")
	}
	if r.cancel != nil {
		r.cancel()
	}
	ectx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.mu.Unlock()
	go c.explain(ectx, block)
}

// endStall: the stall is over (ActStallEnd).
func (c *Controller) endStall(now time.Time) {
	r := &c.stalls
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeAll(now)
	r.block = blockref.Ref{}
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
}

func (r *stallRecorder) openWait(now time.Time, block blockref.Ref, input, dsl string) {
	if r.open == nil {
		r.open = map[[2]string]int{}
	}
	k := [2]string{dsl, block.ID()}
	if _, ok := r.open[k]; ok {
		return
	}
	r.open[k] = len(r.waits)
	r.waits = append(r.waits, stall.Wait{Start: now, Who: "controller", Unit: block.String(), Input: input,
		Component: dsl, Block: block.ID()})
}

func (r *stallRecorder) closeAll(now time.Time) {
	for k, i := range r.open {
		r.waits[i].End = now
		delete(r.open, k)
	}
	r.trim()
}

// explain asks sigd why block's entries are not ready, every
// ExplainInterval until ctx ends (endStall).
func (c *Controller) explain(ctx context.Context, block blockref.Ref) {
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.sig.ExplainPending(rctx, &sigv1.ExplainPendingRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline,
			BlockIds: []string{block.ID()}})
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Debug("explain pending", "block", block.String(), "err", err)
		} else {
			c.stalls.answer(c.cfg.Clock.Now(), block, resp)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.Clock.After(c.cfg.ExplainInterval):
		}
	}
}

// answer records sigd's answer about block, taken at now (the
// controller's clock, the goodput timeline's).
func (r *stallRecorder) answer(now time.Time, block blockref.Ref, resp *sigv1.ExplainPendingResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.block != block {
		return // the stall ended meanwhile
	}
	first := r.answers == 0
	r.answers++
	named := map[[2]string]bool{}
	for _, e := range resp.GetEntries() {
		if e.GetBlockId() != block.ID() {
			continue
		}
		dsl := e.GetComponentDsl()
		named[[2]string{dsl, block.ID()}] = true
		if _, ok := r.open[[2]string{dsl, block.ID()}]; !ok {
			// An entry the solution did not show pending: waited on since
			// the stall began if sigd names it in its first answer.
			at := now
			if first {
				at = r.since
			}
			var input string
			if len(e.GetInputs()) > 0 {
				input = e.GetInputs()[0]
			}
			r.openWait(at, block, input, dsl)
		}
		x := stall.Explanation{At: now, Component: dsl, Block: block.ID(), Kind: pendingKind(e.GetKind()),
			Running: time.Duration(e.GetRunningMs()) * time.Millisecond, Detail: e.GetDetail()}
		for _, a := range e.GetAhead() {
			x.Ahead = append(x.Ahead, stall.Ahead{Client: a.GetClient(), Priority: a.GetPriority(), Tasks: int(a.GetTasks())})
		}
		r.exps = append(r.exps, x)
	}
	// A wait sigd no longer names is over (its entry is ready); the
	// placeholder for the block as a whole too, once sigd names entries.
	for k, i := range r.open {
		if !named[k] && (k[0] != "" || len(named) > 0) {
			r.waits[i].End = now
			delete(r.open, k)
		}
	}
	r.trim()
}

func pendingKind(k sigv1.PendingKind) stall.Kind {
	switch k {
	case sigv1.PendingKind_PENDING_KIND_QUEUED:
		return stall.Queued
	case sigv1.PendingKind_PENDING_KIND_RUNNING:
		return stall.Running
	case sigv1.PendingKind_PENDING_KIND_FAILED:
		return stall.Failed
	case sigv1.PendingKind_PENDING_KIND_INGESTION:
		return stall.Ingestion
	case sigv1.PendingKind_PENDING_KIND_RECOMPUTING:
		return stall.Recomputing
	}
	return stall.Pending
}

// StallLedger is the job's input stall charged to causes, as of now
// (trainer/accounting/stall): the input-stall intervals of the job's
// goodput timeline against the waits and explanations this process
// recorded. Safe from any goroutine.
func (c *Controller) StallLedger(now time.Time) stall.Ledger {
	var in stall.Input
	for _, iv := range c.acct.Intervals(now, goodput.InputStall) {
		in.Stalls = append(in.Stalls, stall.Interval{Start: iv.Start, End: iv.End})
	}
	c.stalls.mu.Lock()
	in.Waits = slices.Clone(c.stalls.waits)
	in.Explanations = slices.Clone(c.stalls.exps)
	c.stalls.mu.Unlock()
	return stall.Compute(in)
}
