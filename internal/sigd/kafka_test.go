package sigd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/sigd"
	"github.com/sigdata/sig/internal/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/ready"
)

// Every topic sigd reads or writes exists as soon as it serves, before
// anything is produced or memoized: a subscriber of sig.memo.ready (or kcat)
// that starts first finds the topic instead of "Unknown topic or partition".
func TestTopicsExistAtStart(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1})
	sigdtest.Start(t, w, sigd.Config{Ingest: []string{"ads"}}, sigd.Options{})
	cl, err := w.Kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := []string{ready.Topic, "raw.ads", "raw.ads.dlq"}
	td, err := kadm.NewClient(cl).ListTopics(ctx, want...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if d, ok := td[name]; !ok || d.Err != nil || len(d.Partitions) == 0 {
			t.Errorf("topic %s at start: %+v", name, d)
		}
	}
	// A subscriber's fetch of the empty topic succeeds (no error, no record).
	sub, err := w.Kafka.Client(kgo.ConsumeTopics(ready.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	f := sub.PollFetches(pctx)
	f.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("fetch %s[%d]: %v", topic, p, err)
		}
	})
	if n := f.NumRecords(); n != 0 {
		t.Errorf("%d records on %s before any memo was written", n, ready.Topic)
	}
}
