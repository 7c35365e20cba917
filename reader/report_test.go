package reader

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
)

// answeringReporter answers every report with answer, after release is
// closed (nil: at once), and counts the reports.
type answeringReporter struct {
	answer  *sigv1.ReportCorruptMemoResponse
	release chan struct{}

	mu sync.Mutex
	n  int
}

func (r *answeringReporter) ReportCorruptMemo(ctx context.Context, _ canon.Key, _ blockref.Memo, _, _ string) (*sigv1.ReportCorruptMemoResponse, error) {
	r.mu.Lock()
	r.n++
	release := r.release
	r.mu.Unlock()
	if release != nil {
		<-release
	}
	return r.answer, nil
}

func (r *answeringReporter) reports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestReportAfterRepair (issue 27): a reader reports a failing block once
// (not once a unit) while it keeps failing. Once sigd has answered that
// it is replacing the object reported (corrupt: recomputing it) and a unit
// of the block reads back, whichever comes first, the block's next
// failure is of another object and is reported at once; before, it waited
// out the minute after the first report, and the block stayed DataLoss
// and READY meanwhile. A block sigd found healthy stays reported for the
// minute even when a unit of it reads back in between, so that a reader
// that refuses some units of an object sigd accepts does not report it
// once a unit.
func TestReportAfterRepair(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 200, Graphs: fleetGraphs(t, "ctr_small")})
	ctx := context.Background()
	in := f.inputs[0]
	key := block.MemoKey(in.key, blockref.ParseMemo(f.blocks[0].id))
	damage := func() {
		t.Helper()
		data, _, err := f.store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := blocktest.DamageFooter(data, blocktest.FooterDamage{Name: "rows", Field: `"rows":`})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Put(ctx, key, bad, nil); err != nil {
			t.Fatal(err)
		}
	}
	repair := func() {
		t.Helper()
		if err := f.memoize(ctx, 0, in, block.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *Server, wantOK bool) {
		t.Helper()
		_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 4096, nil)})
		if wantOK && err != nil {
			t.Fatalf("reading the repaired block: %v", err)
		}
		if !wantOK && Status(err).Code() != codes.DataLoss {
			t.Fatalf("reading the damaged block: %v, want DataLoss", err)
		}
	}
	corrupt := &sigv1.ReportCorruptMemoResponse{Corrupt: true, State: sigv1.BlockState_BLOCK_STATE_PENDING, AuditId: "a1"}
	healthy := &sigv1.ReportCorruptMemoResponse{State: sigv1.BlockState_BLOCK_STATE_READY}

	for _, tc := range []struct {
		name string
		// answer is sigd's answer; late: it comes after the block read
		// back repaired.
		answer *sigv1.ReportCorruptMemoResponse
		late   bool
		want   int // reports after the second damage
	}{
		{"repaired", corrupt, false, 2},
		{"repaired, answered after the read back", corrupt, true, 2},
		{"healthy", healthy, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &answeringReporter{answer: tc.answer}
			if tc.late {
				rep.release = make(chan struct{})
			}
			s := f.server(t, Config{Reporter: rep})
			defer repair()
			damage()
			read(s, false)
			read(s, false)
			if tc.late {
				repair()
				read(s, true)
				close(rep.release)
			}
			s.reports.wg.Wait()
			if n := rep.reports(); n != 1 {
				t.Fatalf("%d reports of the block after two failed reads, want 1", n)
			}
			repair()
			read(s, true)
			damage()
			read(s, false)
			s.reports.wg.Wait()
			if n := rep.reports(); n != tc.want {
				t.Errorf("%d reports after the block read back and failed again, want %d", n, tc.want)
			}
		})
	}
}
