package reader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Reporter tells sigd of a memo object that did not read back although the
// read solution said it was ready: corrupt (the unit fails with DataLoss) or
// missing (reason ReasonCorrupt), or whose values differ from what the
// guard recomputed (ReasonMemoMismatch). sigd checks the object itself
// (for a mismatch: recomputes the block and compares) and recomputes that
// one block if it is bad (SIG.ReportCorruptMemo), so a report is a hint,
// never a decision of the reader's.
type Reporter interface {
	ReportCorruptMemo(ctx context.Context, component canon.Key, block blockref.Memo, reason, detail string) (*sigv1.ReportCorruptMemoResponse, error)
}

// SIGReporter reports through a SIG client: cmd/reader's, with a token of
// role reader (any component), or a trainer's (its client's components).
func SIGReporter(c sigv1.SIGClient) Reporter { return sigReporter{c} }

type sigReporter struct{ c sigv1.SIGClient }

func (r sigReporter) ReportCorruptMemo(ctx context.Context, component canon.Key, block blockref.Memo, reason, detail string) (*sigv1.ReportCorruptMemoResponse, error) {
	return r.c.ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: component.String(), BlockId: block.String(),
		Reason: reason, Detail: detail})
}

const (
	// reportEvery: a block is reported at most once in this interval by one
	// reader while it keeps failing. Every unit of a corrupt block fails
	// until sigd has marked it pending (then readers refuse it before
	// reading), and units taken before find its object gone until it is
	// recomputed: one report suffices. Once sigd has said it is replacing
	// the object reported and a unit of the block reads back, the block is
	// forgotten (readOK): a failure after that is of another object, and
	// is reported at once (issue 27: a block repaired, then damaged again
	// within the minute, stayed DataLoss until the minute was out).
	reportEvery = time.Minute
	// maxReportsInFlight bounds the reports a reader sends at once; more are
	// dropped (a later failure reports again).
	maxReportsInFlight = 4
	// maxReportedBlocks bounds the blocks remembered as reported.
	maxReportedBlocks = 4096
	reportTimeout     = 30 * time.Second
)

// reports sends a Server's reports in the background, each block at most
// once per reportEvery while it fails, so that a failing unit never waits
// for sigd.
type reports struct {
	r   Reporter
	log *slog.Logger

	mu       sync.Mutex
	last     map[memoBlock]reported
	inFlight int
	wg       sync.WaitGroup
	// remembered is len(last), read without the lock by every unit that
	// reads back (readOK), which has nothing to do while it is 0.
	remembered atomic.Int64
}

// reported is what a reader remembers of a block it reported.
type reported struct {
	at time.Time
	// replaced: sigd answered that the object reported is on its way out:
	// corrupt (recomputed by this report), the block pending (recomputed,
	// on another report) or not in its cache (evicted). A unit of the
	// block that reads back after that read another object.
	replaced bool
	// readOK: a unit of the block read back while the report was in
	// flight.
	readOK bool
}

// newReports returns the reports of a Server, nil without a Reporter.
func newReports(cfg Config) *reports {
	if cfg.Reporter == nil {
		return nil
	}
	return &reports{r: cfg.Reporter, log: cfg.Logger, last: map[memoBlock]reported{}}
}

// brokenMemo reports whether a memo read error shows the object bad (as
// opposed to the store being down or the call cancelled): corrupt, or
// missing although the unit said it was ready.
func brokenMemo(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, block.ErrCorrupt) || errors.Is(err, block.ErrNoColumn) ||
		errors.Is(err, objstore.ErrNotFound)
}

// noteMemoError reports the memo object of input in if err shows it bad.
func (s *Server) noteMemoError(p *plan, in inputPlan, err error) {
	if s.reports == nil || !brokenMemo(err) {
		return
	}
	reason := ReasonCorrupt
	if errors.Is(err, ErrMemoMismatch) {
		reason = ReasonMemoMismatch
	}
	// The memo entry's block: the input version of the object read
	// (issue 21), which sigd's entries are keyed by.
	s.reports.send(in.component, in.memoBlock, reason, err.Error())
}

// memoBlock names one block of one component's memo.
type memoBlock struct {
	component canon.Key
	block     blockref.Memo
}

func (rs *reports) send(component canon.Key, blockID blockref.Memo, reason, detail string) {
	k := memoBlock{component, blockID}
	now := time.Now()
	rs.mu.Lock()
	if r, ok := rs.last[k]; (ok && now.Sub(r.at) < reportEvery) || rs.inFlight >= maxReportsInFlight {
		rs.mu.Unlock()
		return
	}
	if len(rs.last) >= maxReportedBlocks {
		for b, r := range rs.last {
			if now.Sub(r.at) >= reportEvery {
				rs.forget(b)
			}
		}
		if len(rs.last) >= maxReportedBlocks {
			rs.mu.Unlock()
			return
		}
	}
	rs.remember(k, reported{at: now})
	rs.inFlight++
	rs.wg.Add(1)
	rs.mu.Unlock()
	go func() {
		defer rs.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		resp, err := rs.r.ReportCorruptMemo(ctx, component, blockID, reason, detail)
		cancel()
		code := status.Code(err)
		rs.mu.Lock()
		rs.inFlight--
		switch r, ok := rs.last[k]; {
		case !ok || !r.at.Equal(now):
			// Forgotten meanwhile (pruned): nothing to update.
		case code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled || code == codes.Unknown:
			rs.forget(k) // not heard: the next failure reports again
		case code == codes.NotFound || err == nil && (resp.GetCorrupt() || resp.GetState() == sigv1.BlockState_BLOCK_STATE_PENDING):
			if r.readOK {
				rs.forget(k) // read back already: the object is another
			} else {
				r.replaced = true
				rs.last[k] = r
			}
		}
		rs.mu.Unlock()
		switch {
		case code == codes.NotFound:
			// Evicted since the unit's read solution was taken.
			rs.log.Info("reported memo block is not in sigd's cache", "component", component, "block", blockID.String())
			return
		case err != nil:
			rs.log.Warn("reporting a corrupt memo object to sigd failed", "component", component, "block", blockID, "reason", reason, "err", err)
			return
		}
		rs.log.Info("reported a corrupt memo object to sigd", "component", component, "block", blockID, "reason", reason,
			"corrupt", resp.GetCorrupt(), "state", resp.GetState(), "finding", resp.GetFinding(), "audit_id", resp.GetAuditId())
	}()
}

// remember and forget change rs.last, and remembered with it; rs.mu is
// held.
func (rs *reports) remember(k memoBlock, r reported) {
	if _, ok := rs.last[k]; !ok {
		rs.remembered.Add(1)
	}
	rs.last[k] = r
}

func (rs *reports) forget(k memoBlock) {
	if _, ok := rs.last[k]; ok {
		rs.remembered.Add(-1)
		delete(rs.last, k)
	}
}

// readOK notes that a unit read block k's memo object back with every
// check passed. A block whose reported object sigd said it was replacing
// is forgotten: the object read is its successor, and a failure from now
// on is reported at once. A block sigd found healthy stays remembered
// until reportEvery is out: a reader that refuses what sigd accepts (one
// computing wrong, whose guard fails some units of the block and passes
// others) reports it once a minute, not once a unit. One whose minute is
// out is forgotten too, so that units read while nothing is remembered
// skip the lock (noteMemoReads).
func (rs *reports) readOK(k memoBlock) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.last[k]
	switch {
	case !ok:
	case r.replaced || time.Since(r.at) >= reportEvery:
		rs.forget(k)
	default:
		r.readOK = true // sigd's answer may still be on its way
		rs.last[k] = r
	}
}

// noteMemoReads tells the reports that every memo object of unit p (its
// MEMO inputs' and memo nodes') read back and passed every check, the
// guard's included.
func (s *Server) noteMemoReads(p *plan) {
	if s.reports == nil || s.reports.remembered.Load() == 0 {
		return
	}
	for _, in := range p.reads() {
		if in.mode == readerv1.InputMode_INPUT_MODE_MEMO {
			s.reports.readOK(memoBlock{in.component, in.memoBlock})
		}
	}
}
