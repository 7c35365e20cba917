package trainer

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// env is a warehouse of raw blocks in a real MinIO with a real sigd serving
// it in the test process (sigd/sigdtest).
type env struct {
	w    *sigdtest.Warehouse
	sigd *sigdtest.Server
}

func newEnv(t testing.TB, blocks, rows int, opts sigd.Options) *env {
	t.Helper()
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: blocks, RowsPerBlock: rows, Seed: 11})
	s := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 2}, opts)
	return &env{w: w, sigd: s}
}

// jobConfig is a small job over every block of the warehouse.
func (e *env) jobConfig(t testing.TB, pipeline string) JobConfig {
	r := e.w.All()
	return JobConfig{ControllerConfig: ControllerConfig{
		Client: "ctr", Pipeline: pipeline, Graph: sigdtest.DSL(t, "ctr_small"),
		From: r.StartMicros, To: r.EndMicros,
		SigdAddr: e.sigd.Addr(), Token: e.sigd.Tokens["trainer"], Store: e.w.Store, KafkaBrokers: e.w.Kafka.Brokers,
		Hosts: 2, Chips: 4, CaughtUpChips: 1, EpochUnits: 2, CaughtUpEpochUnits: 1,
		BatchSize: 128, ReadBatchRows: 256, Vocab: 1 << 12, StatusInterval: -1,
		Tick: 20 * time.Millisecond, RetryDelay: 100 * time.Millisecond, CompileTime: time.Millisecond,
		Logger: testLogger(t),
	}}
}

// memoize submits the ctr_small graph as pipeline and waits until SIG has
// memoized every block, so later pipelines of the same graph find their
// data ready.
func (e *env) memoize(t testing.TB, pipeline string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := e.sigd.SIG(t, "ctr")
	if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", pipeline, 0, sigdtest.DSL(t, "ctr_small"), e.w.All())); err != nil {
		t.Fatal(err)
	}
	sigdtest.WaitComplete(ctx, t, c, "ctr", pipeline)
}

// allEventIDs returns every event id of the warehouse's blocks, with the
// block version it is in.
func (e *env) allEventIDs(t testing.TB) map[int64]blockref.Ref {
	t.Helper()
	out := map[int64]blockref.Ref{}
	for _, m := range e.w.Blocks {
		rec, err := block.ReadColumns(context.Background(), e.w.Store, m, []string{"event_id"})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Column(0).(interface{ Int64Values() []int64 }).Int64Values() {
			out[id] = m.Ref()
		}
		rec.Release()
	}
	return out
}

// checkExactlyOnce checks that the pipeline's last committed checkpoint
// trained every event of the warehouse exactly once, each from its own
// block.
func checkExactlyOnce(t *testing.T, e *env, pipeline string) *checkpoint.Manifest {
	t.Helper()
	cs, err := checkpoint.NewStore(e.w.Store, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := cs.Latest(ctx)
	if err != nil || m == nil {
		t.Fatalf("no committed checkpoint: %v", err)
	}
	_, led, err := cs.Load(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	want := e.allEventIDs(t)
	seen := map[int64]bool{}
	for _, u := range led.Units {
		for _, id := range u.IDs() {
			if seen[id] {
				t.Errorf("event %d trained twice", id)
			}
			seen[id] = true
			if want[id] != u.Unit {
				t.Errorf("event %d trained as part of unit %s, it is in block %s", id, u.Unit, want[id])
			}
		}
	}
	missing := 0
	for id := range want {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 || len(seen) != len(want) {
		t.Errorf("committed ledger has %d events, the range %d (%d missing)", len(seen), len(want), missing)
	}
	units := slices.Clone(m.Units)
	slices.SortFunc(units, blockref.Ref.Compare)
	if len(units) != len(e.w.Blocks) {
		t.Errorf("committed units %v, blocks %d", units, len(e.w.Blocks))
	}
	return m
}

// testLogger logs to a buffer printed when the test fails (or always with
// TRAINER_TEST_LOG=1).
func testLogger(t testing.TB) *slog.Logger {
	var w io.Writer
	if os.Getenv("TRAINER_TEST_LOG") != "" {
		w = os.Stderr
	} else {
		b := &sigdtest.SyncBuffer{}
		w = b
		t.Cleanup(func() {
			if t.Failed() {
				s := b.String()
				if len(s) > 20000 {
					s = s[len(s)-20000:]
				}
				t.Logf("trainer log tail:\n%s", s)
			}
		})
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
