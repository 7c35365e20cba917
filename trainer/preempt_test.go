package trainer

import (
	"context"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/warehouse/blockref"
)

// committedSeq is the sequence number of the pipeline's last committed
// checkpoint (-1 for none).
func committedSeq(t *testing.T, e *env, pipeline string) (int, []blockref.Ref) {
	t.Helper()
	cs, err := checkpoint.NewStore(e.w.Store, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cs.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		return -1, nil
	}
	return m.Seq, m.Units
}

// midEpoch waits until the controller trains an epoch after its first
// checkpoint, and a little more.
func midEpoch(t *testing.T, pp *pipelineProcs) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := pp.client.Status(ctx, &trainerv1.StatusRequest{})
		cancel()
		if err == nil && st.GetCommittedEpochs() >= 1 && st.GetStatus() == "training" {
			time.Sleep(150 * time.Millisecond)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the controller never trained a second epoch")
}

func (pp *pipelineProcs) restart() {
	pp.controller.start()
	for _, h := range pp.hosts {
		h.start()
	}
}

func (pp *pipelineProcs) waitExit(t *testing.T, d time.Duration) {
	t.Helper()
	exited, err := pp.controller.wait(d)
	if !exited {
		t.Fatalf("controller did not exit within %v", d)
	}
	if err != nil {
		t.Fatalf("controller exited with %v", err)
	}
	for _, h := range pp.hosts {
		if exited, err := h.wait(10 * time.Second); !exited || err != nil {
			t.Fatalf("%s: exited %v, %v", h.name, exited, err)
		}
	}
}

// TestPreemptionNotice: a preemption notice longer than the drain lets the
// epoch end early with a checkpoint (paper VI.B, a preempted epoch that
// commits); a notice too short, or none at all (SIGKILL), commits nothing,
// and the restarted job retrains the epoch. Either way the job, restarted,
// finishes with every event trained exactly once.
func TestPreemptionNotice(t *testing.T) {
	e := newEnv(t, 6, 2000, sigd.Options{})
	e.memoize(t, "warm")
	cases := []struct {
		name      string
		preempt   func(t *testing.T, pp *pipelineProcs)
		exit      string
		committed bool
	}{
		{"long-notice-commits", func(t *testing.T, pp *pipelineProcs) {
			pp.controller.signal(syscall.SIGTERM) // --preempt-notice 30s
		}, "preempted", true},
		{"short-notice-retrains", func(t *testing.T, pp *pipelineProcs) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := pp.client.Preempt(ctx, &trainerv1.PreemptRequest{Notice: durationpb.New(time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}, "preempted", false},
		{"no-notice-retrains", func(t *testing.T, pp *pipelineProcs) {
			pp.controller.kill()
		}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pipeline := "pre-" + c.name
			// Slower steps (about 1s epochs) keep the notice away from an
			// epoch's natural end.
			pp := startPipeline(t, e, pipeline, 2, 2, "--preempt-notice", "30s", "--time-scale", "3e6")
			midEpoch(t, pp)
			before, _ := committedSeq(t, e, pipeline)
			c.preempt(t, pp)
			if c.exit != "" {
				pp.waitExit(t, 30*time.Second)
				rep := pp.report(t)
				if rep.Exit != c.exit || rep.Committed != c.committed {
					t.Fatalf("exit %q committed %v, want %q %v", rep.Exit, rep.Committed, c.exit, c.committed)
				}
				if rep.Stats.PreemptedEpochs != 1 || (rep.Stats.PreemptedCommitted == 1) != c.committed {
					t.Fatalf("preempted epochs %d, committed %d", rep.Stats.PreemptedEpochs, rep.Stats.PreemptedCommitted)
				}
			} else {
				for _, h := range pp.hosts {
					h.kill() // the whole job goes down
				}
			}
			after, units := committedSeq(t, e, pipeline)
			if c.committed && after <= before {
				t.Fatalf("checkpoint %d before the notice, %d after: the early epoch end did not commit", before, after)
			}
			if !c.committed && after != before {
				t.Fatalf("checkpoint %d before, %d after: the cut epoch must not commit", before, after)
			}
			t.Logf("checkpoint %d -> %d (%d units) at the preemption", before, after, len(units))
			// The job comes back: it resumes from the last checkpoint and
			// waits for its hosts to rejoin.
			pp.restart()
			pp.waitExit(t, 60*time.Second)
			if rep := pp.report(t); rep.Exit != "done" {
				t.Fatalf("after the restart: exit %q", rep.Exit)
			}
			checkExactlyOnce(t, e, pipeline)
		})
	}
}
