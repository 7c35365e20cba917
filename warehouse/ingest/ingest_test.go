package ingest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
)

// runIngester runs an in-process ingester until stop is called.
func runIngester(t *testing.T, e *env, mod func(*ingest.Config)) (stop func() ingest.Stats) {
	t.Helper()
	c, err := catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ingest.Config{Brokers: e.kafka.Brokers, Store: e.store, Catalog: c, RowsPerBlock: 5000,
		SealAfter: 500 * time.Millisecond, InstanceID: "test-0"}
	if mod != nil {
		mod(&cfg)
	}
	in, err := ingest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	return func() ingest.Stats {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ingester: %v", err)
		}
		c.Close()
		return in.Stats()
	}
}

// Every event ends up in exactly one block; blocks of windows the stream
// has moved past are sealed by the watermark; late events form late blocks.
func TestIngestExactlyOnce(t *testing.T) {
	e := newEnv(t, 3)
	const n = 60_000
	// 10 events per second of event time: 60k events span 100 minutes.
	e.produce(t, gen.Config{Seed: 11, EventsPerSecond: 10, LateFraction: 0.01}, n)
	stop := runIngester(t, e, nil)
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	st := stop()
	blocks := verifyExactlyOnce(t, e.store, e.catalogDir, 1, n)
	t.Logf("stats %+v, %d blocks", st, len(blocks))
	if st.Rows != n || st.DeadLetters != 0 || st.LateBlocks == 0 {
		t.Fatalf("stats %+v", st)
	}
	late := 0
	for _, m := range blocks {
		if m.Late {
			late++
		}
		if m.MinEventTime < m.WindowStart || m.MaxEventTime >= m.WindowStart+m.WindowLength {
			t.Fatalf("block %s has events outside its window", m.ID)
		}
	}
	if late == 0 {
		t.Fatal("no late block catalogued")
	}
	// A restart re-consumes nothing new and writes nothing.
	stop = runIngester(t, e, nil)
	time.Sleep(2 * time.Second)
	if st := stop(); st.Blocks != 0 {
		t.Fatalf("restart with nothing new wrote %d blocks", st.Blocks)
	}
	verifyExactlyOnce(t, e.store, e.catalogDir, 1, n)
}
