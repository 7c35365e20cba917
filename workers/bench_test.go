package workers

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
)

// BenchmarkQueueCycle measures one task's life through the queue, with
// persistence on disk: Enqueue, Lease, Complete, each a durable Pebble
// batch. The target is 20,000 cycles/s in the default durability.
// The clients and priorities vary so the scheduler has real choices.
func BenchmarkQueueCycle(b *testing.B) {
	for _, d := range []Durability{DurabilityProcess, DurabilityMachine} {
		b.Run(d.String(), func(b *testing.B) {
			q := openBench(b, d)
			ctx := context.Background()
			comp := numKey(42)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				r := Request{Task: TaskID{Component: comp, Block: blockref.ParseMemo(strconv.Itoa(i))}, Client: clients[i%len(clients)], Pipeline: "p", Priority: int32(i % 3)}
				if _, err := q.Enqueue(r); err != nil {
					b.Fatal(err)
				}
				l, ok, err := q.TryLease("w")
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				if err := q.Complete(ctx, l.ID, Result{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
		})
	}
}

// BenchmarkQueueCycleParallel is the same cycle from several goroutines at
// once, as producers (submits) and workers run in sigd; concurrent callers
// share WAL flushes and fsyncs.
func BenchmarkQueueCycleParallel(b *testing.B) {
	for _, d := range []Durability{DurabilityProcess, DurabilityMachine} {
		b.Run(d.String(), func(b *testing.B) {
			q := openBench(b, d)
			ctx := context.Background()
			comp := numKey(42)
			var n atomic.Int64
			b.SetParallelism(4) // 4 x GOMAXPROCS goroutines
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(n.Add(1))
					r := Request{Task: TaskID{Component: comp, Block: blockref.ParseMemo(strconv.Itoa(i))}, Client: clients[i%len(clients)], Pipeline: "p", Priority: int32(i % 3)}
					if _, err := q.Enqueue(r); err != nil {
						b.Error(err)
						return
					}
					// Another goroutine may have taken this task; take
					// whatever comes next, as a worker would.
					l, ok, err := q.TryLease("w")
					if err != nil {
						b.Error(err)
						return
					}
					if !ok {
						continue
					}
					if err := q.Complete(ctx, l.ID, Result{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
		})
	}
}

var clients = []string{"ads", "search", "feed", "research"}

func openBench(b *testing.B, d Durability) *Queue {
	b.Helper()
	q, err := Open(b.TempDir(), Options{Clock: clock.Real{}, Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

// BenchmarkOpen measures a restart: Open rebuilding the state of a store
// holding 100,000 tasks (four clients, two pipelines each, a tenth of the
// tasks leased), then Close. B/op is everything Open allocates; MB-state
// is what the rebuilt state keeps (the heap after Open less the heap
// before), so B/op less it is what the rebuild spends on the way.
func BenchmarkOpen(b *testing.B) {
	const tasks = 100_000
	dir := b.TempDir()
	clk := clock.NewFake(time.Unix(0, 0))
	q, err := Open(dir, Options{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	comp := numKey(7)
	var reqs []Request
	for i := 0; i < tasks; i++ {
		reqs = append(reqs, Request{Task: TaskID{Component: comp, Block: blockref.ParseMemo(strconv.Itoa(i))}, Client: clients[i%len(clients)], Pipeline: "p" + strconv.Itoa(i%2), Priority: int32(i % 3)})
		if len(reqs) == 1000 {
			if _, err := q.Enqueue(reqs...); err != nil {
				b.Fatal(err)
			}
			reqs = reqs[:0]
		}
	}
	for i := 0; i < tasks/10; i++ {
		if _, ok, err := q.TryLease("w"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	q.Close()
	b.ReportAllocs()
	var before, after runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		q, err := Open(dir, Options{Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := q.Backlog(); got != tasks {
			b.Fatalf("reopened with %d tasks, want %d", got, tasks)
		}
		q.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB-state")
}
