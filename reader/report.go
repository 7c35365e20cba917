package reader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
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
	// reader. Every unit of a corrupt block fails until sigd has marked it
	// pending (then readers refuse it before reading): one report suffices.
	reportEvery = time.Minute
	// maxReportsInFlight bounds the reports a reader sends at once; more are
	// dropped (a later failure reports again).
	maxReportsInFlight = 4
	// maxReportedBlocks bounds the blocks remembered as reported.
	maxReportedBlocks = 4096
	reportTimeout     = 30 * time.Second
)

// reports sends a Server's reports in the background, each block at most
// once per reportEvery, so that a failing unit never waits for sigd.
type reports struct {
	r   Reporter
	log *slog.Logger

	mu       sync.Mutex
	last     map[memoBlock]time.Time
	inFlight int
	wg       sync.WaitGroup
}

// newReports returns the reports of a Server, nil without a Reporter.
func newReports(cfg Config) *reports {
	if cfg.Reporter == nil {
		return nil
	}
	return &reports{r: cfg.Reporter, log: cfg.Logger, last: map[memoBlock]time.Time{}}
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
	if t, ok := rs.last[k]; (ok && now.Sub(t) < reportEvery) || rs.inFlight >= maxReportsInFlight {
		rs.mu.Unlock()
		return
	}
	if len(rs.last) >= maxReportedBlocks {
		for b, t := range rs.last {
			if now.Sub(t) >= reportEvery {
				delete(rs.last, b)
			}
		}
		if len(rs.last) >= maxReportedBlocks {
			rs.mu.Unlock()
			return
		}
	}
	rs.last[k] = now
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
		if code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled || code == codes.Unknown {
			delete(rs.last, k) // not heard: the next failure reports again
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
