package ingest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

// BenchmarkIngest measures ingestion from kfake to sealed, catalogued blocks
// in MinIO: each iteration produces 500k generated events (untimed) to a
// fresh topic, then times an ingester from start until it has sealed every
// row. It runs with GOMAXPROCS=1 (the ingester, the Kafka client and the
// in-process kfake broker share one core; MinIO is its own process) and
// reports events/s. Target: >= 200k events/s.
func BenchmarkIngest(b *testing.B) {
	for _, format := range []string{record.ContentTypeRow, record.ContentTypeJSON} {
		name := "row"
		if format == record.ContentTypeJSON {
			name = "json"
		}
		b.Run(name, func(b *testing.B) { benchIngest(b, format) })
	}
}

func benchIngest(b *testing.B, format string) {
	const n = 500_000
	e := newEnv(b, 1)
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		topic := fmt.Sprintf("raw.ads.bench%d", i)
		if err := e.kafka.CreateTopic(context.Background(), topic, 1); err != nil {
			b.Fatal(err)
		}
		cl, err := e.kafka.Client(kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))
		if err != nil {
			b.Fatal(err)
		}
		if err := gen.New(gen.Config{Seed: uint64(i), EventsPerSecond: 1000}).Produce(context.Background(), cl, topic, n, format); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		cat, err := catalog.Open(filepath.Join(b.TempDir(), "cat"))
		if err != nil {
			b.Fatal(err)
		}
		in, err := ingest.New(ingest.Config{Brokers: e.kafka.Brokers, Topic: topic, Group: topic, Store: e.store,
			Catalog: cat, RowsPerBlock: 100_000, SealAfter: 100 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		prev := runtime.GOMAXPROCS(1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		t0 := time.Now()
		go func() { done <- in.Run(ctx) }()
		for in.Stats().Rows < n {
			select {
			case err := <-done:
				b.Fatalf("ingester stopped: %v", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		total += time.Since(t0)
		b.StopTimer()
		cancel()
		<-done
		runtime.GOMAXPROCS(prev)
		cat.Close()
	}
	b.ReportMetric(float64(b.N)*n/total.Seconds(), "events/s")
}
