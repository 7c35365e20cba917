package trainer

import (
	"context"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
)

// TestReadBatchesLargerThanBufferRoom trains with the reader's record
// batches (ReadBatchRows 1024, the default: a whole 1,000-row block) nearly
// as large as the host's buffer (8 × BatchSize 128 = 1,024 examples). After
// the first unit the buffer keeps 1,000 mod 128 = 104 examples, fewer than a
// batch, and the next unit's 1,000-row record does not fit beside them:
// the host's reader then waited for room and its batch builder for a full
// batch, forever (BenchmarkCaughtUpStream's jobs stalled so at the first
// epoch, with the readers idle). Every event must be trained once.
func TestReadBatchesLargerThanBufferRoom(t *testing.T) {
	e := newEnv(t, 4, 1000, sigd.Options{})
	cfg := e.jobConfig(t, "ctr_room")
	cfg.Hosts, cfg.Chips, cfg.EpochUnits = 1, 2, 2
	cfg.BatchSize, cfg.ReadBatchRows, cfg.BufferExamples = 128, 1024, 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunJob(ctx, cfg)
	if err != nil {
		t.Fatalf("%v (a host stalled: its buffer holds less than a batch and the next record does not fit)", err)
	}
	if rep.Exit != "done" || rep.Units != 4 {
		t.Fatalf("exit %s with %d units", rep.Exit, rep.Units)
	}
	checkExactlyOnce(t, e, "ctr_room")
}
