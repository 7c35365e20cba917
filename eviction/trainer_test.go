package eviction_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer"
)

// TestTrainerHoldAfterEviction: a training job in its initial phase (which
// reads memoized inputs) has its data evicted after its first epoch. The
// job is not broken: the next read solution shows the blocks pending (or a
// reader reports them pending), the controller places a transient training
// hold, SIG recomputes the data on demand, the completion events lift the
// hold with no person involved, and the job trains every block.
func TestTrainerHoldAfterEviction(t *testing.T) {
	e := newEnv(t, evictiontest.Config{Blocks: 10, Rows: 1000})
	e.Submit("ctr", "ctr-train", evictiontest.CtrDSL)
	sol := e.WaitComplete("ctr", "ctr-train")
	affected := []canon.Key{sigdtest.InputKey(t, sol, "qa_overlap"), sigdtest.InputKey(t, sol, "query_ids")}
	ctx, cancel := context.WithTimeout(e.Ctx, 90*time.Second)
	defer cancel()

	evicted := make(chan error, 1)
	cfg := trainer.JobConfig{ControllerConfig: trainer.ControllerConfig{
		Client: "ctr", Pipeline: "ctr-train", From: e.All().StartMicros, To: e.All().EndMicros,
		SigdAddr: e.Srv.Addr(), Token: e.Srv.Tokens["trainer"], Store: e.Srv.Store(), KafkaBrokers: e.Kafka.Brokers,
		Hosts: 2, Chips: 4, CaughtUpChips: 1, EpochUnits: 2, CaughtUpEpochUnits: 1,
		BatchSize: 128, ReadBatchRows: 256, Vocab: 1 << 12, StatusInterval: -1,
		Tick: 20 * time.Millisecond, RetryDelay: 100 * time.Millisecond, CompileTime: time.Millisecond,
		HoldPollInterval: 5 * time.Second,
		Logger:           slog.New(slog.NewTextHandler(e.Srv.Logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("job", "ctr-train"),
	}, OnController: func(c *trainer.Controller, _ string) {
		// Evict once the first epoch is committed.
		go func() {
			for ctx.Err() == nil {
				if c.Status().CommittedEpochs >= 1 {
					_, err := e.SIG(evictiontest.Operator).Evict(ctx, &sigv1.EvictRequest{
						Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: evictiontest.FaultySubgraph}, Reason: "tokenizer bug"})
					evicted <- err
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			evicted <- ctx.Err()
		}()
	}}
	rep, err := trainer.RunJob(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-evicted; err != nil {
		t.Fatalf("eviction: %v", err)
	}
	if rep.Exit != "done" || rep.Units != len(e.Blocks) {
		t.Fatalf("job exit %q with %d of %d units", rep.Exit, rep.Units, len(e.Blocks))
	}
	if rep.Stats.PermanentHolds != 0 {
		t.Errorf("%d permanent holds: %+v", rep.Stats.PermanentHolds, rep.Holds)
	}
	transient := 0
	for _, h := range rep.Holds {
		if h.Kind != "transient" {
			continue
		}
		transient++
		if h.Lifted.IsZero() || h.LiftedBy != "data ready" || !strings.Contains(h.Reason, "pending") {
			t.Errorf("transient hold %+v was not lifted", h)
		}
	}
	if transient == 0 || rep.Stats.TransientHolds == 0 {
		t.Errorf("no transient hold after the eviction: holds %+v, failures %q", rep.Holds, rep.Failures)
	}
	// The evicted data was recomputed for the job.
	for _, k := range affected {
		e.CheckMemoized(k)
	}
}
