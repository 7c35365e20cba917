package ps

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchTables is an Ads-like caught-up model: 100 tables of widths 8 to 64
// (four widths, two optimizers: eight stacks), 10^4 to 10^5 rows.
func benchTables() []Table {
	rng := rand.New(rand.NewPCG(100, 8))
	dims := []int{8, 16, 32, 64}
	var ts []Table
	for i := range 100 {
		tb := Table{Name: fmt.Sprintf("t%03d", i), Vocab: 10_000 + rng.Int64N(90_000), Dim: dims[rng.IntN(len(dims))],
			Optimizer: Adagrad, LearningRate: 0.05, InitialAccumulator: 0.1, InitScale: 0.05, InitSeed: 1}
		if rng.IntN(3) == 0 {
			tb.Optimizer, tb.InitialAccumulator = SGD, 0
		}
		ts = append(ts, tb)
	}
	return ts
}

// benchStep is one step of 8 cores × 32 examples: per table and core, 32
// examples of 1 to 3 Zipf-distributed values each.
func benchStep(tables []Table, cores int, seed uint64) (Batch, Grads) {
	rng := rand.New(rand.NewPCG(seed, 1))
	b, g := make(Batch, cores), make(Grads, cores)
	for c := range cores {
		b[c], g[c] = make([][]int64, len(tables)), make([][]float32, len(tables))
		for t, tb := range tables {
			z := rand.NewZipf(rng, 1.1, 1, uint64(tb.Vocab-1))
			for range 32 {
				for range 1 + rng.IntN(3) {
					b[c][t] = append(b[c][t], int64(z.Uint64()))
				}
			}
			g[c][t] = make([]float32, len(b[c][t])*tb.Dim)
			for i := range g[c][t] {
				g[c][t][i] = float32(rng.NormFloat64()) * 0.01
			}
		}
	}
	return b, g
}

// BenchmarkCoalescing measures caught-up training steps against 4
// parameter servers over loopback gRPC, 100 tables, 8 TPU cores (paper
// V.B): the uncoalesced baseline (one Lookup and one Apply per core, table
// and server), coalesced (one pair per server), and coalesced with table
// stacking. The three clients run step by step in turn in the same run, on
// their own servers. Reported per configuration: wall ms per step (Lookup +
// Apply) and RPCs per step over all servers; and the ratio of uncoalesced
// to coalesced step time. Target: ≥ 3x.
func BenchmarkCoalescing(b *testing.B) {
	const servers, cores = 4, 8
	ctx := context.Background()
	tables := benchTables()
	type config struct {
		name     string
		mode     Mode
		stacking bool
	}
	configs := []config{{"uncoalesced", Uncoalesced, false}, {"coalesced", Coalesced, false}, {"coalesced_stacked", Coalesced, true}}
	clients := make([]*Client, len(configs))
	clusters := make([]*cluster, len(configs))
	for i, cf := range configs {
		clusters[i] = startCluster(b, servers, nil)
		c, err := NewClient(ctx, clusters[i].conns, ClientConfig{Tables: tables, Stacking: cf.stacking, Mode: cf.mode, Cores: cores})
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	type step struct {
		b Batch
		g Grads
	}
	var steps []step
	for s := range 4 {
		bt, gr := benchStep(tables, cores, uint64(s))
		steps = append(steps, step{bt, gr})
	}
	elapsed := make([]time.Duration, len(configs))
	rpcs := make([]int64, len(configs))
	n := 0
	for b.Loop() {
		st := steps[n%len(steps)]
		for i, c := range clients {
			l0, a0 := clusters[i].stats()
			t0 := time.Now()
			f, err := c.Lookup(ctx, st.b)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Apply(ctx, f, st.g); err != nil {
				b.Fatal(err)
			}
			elapsed[i] += time.Since(t0)
			l1, a1 := clusters[i].stats()
			rpcs[i] += l1 - l0 + a1 - a0
		}
		n++
	}
	ms := func(i int) float64 { return float64(elapsed[i].Microseconds()) / 1000 / float64(n) }
	for i, cf := range configs {
		b.ReportMetric(ms(i), cf.name+"_ms/step")
		b.ReportMetric(float64(rpcs[i])/float64(n), cf.name+"_rpcs/step")
	}
	b.ReportMetric(ms(0)/ms(1), "speedup")
	b.ReportMetric(ms(0)/ms(2), "speedup_stacked")
}
