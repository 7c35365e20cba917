package embreport

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
)

// PSMode is one client mode's measurements.
type PSMode struct {
	Mode string `json:"mode"`
	// PSMS is the wall time of a step's Lookup and Apply against the
	// parameter servers, RPCs the RPCs per step over all servers.
	PSMS float64 `json:"ps_ms"`
	RPCs float64 `json:"rpcs"`
	// StepMS adds the TensorCore's modelled time: the host fetches the
	// embeddings, the TPU runs the step, then the updates go back.
	StepMS float64 `json:"step_ms"`
}

// PSResult is the caught-up comparison of paper VII.E for one model.
type PSResult struct {
	Tables   int     `json:"tables"`
	Servers  int     `json:"servers"`
	Cores    int     `json:"cores"`
	Batch    int     `json:"batch"`
	Steps    int     `json:"steps"`
	VocabCap int64   `json:"vocab_cap"`
	TPUms    float64 `json:"tpu_ms"`
	// Uncoalesced and Coalesced; Speedup is the step time ratio and
	// PSSpeedup the Lookup+Apply time ratio.
	Uncoalesced PSMode  `json:"uncoalesced"`
	Coalesced   PSMode  `json:"coalesced"`
	Speedup     float64 `json:"speedup"`
	PSSpeedup   float64 `json:"ps_speedup"`
}

// psRun trains the model's caught-up phase against parameter servers
// (paper V.B, VII.E): its tables row-sharded over o.PSServers in-process
// servers on loopback gRPC, o.PSCores TPU cores of the caught-up slice
// sending their lookups and gradients uncoalesced (one Lookup and one Apply
// per core, table and server) and coalesced (one pair per server), on the
// same batches, the two modes taking turns step by step.
func psRun(ctx context.Context, sc Scaled, o Options) (*PSResult, error) {
	cap := vocabCap(sc.Prod, o.PSElements)
	var tables []ps.Table
	for _, t := range sc.Prod {
		tables = append(tables, ps.Table{Name: t.Name, Vocab: min(t.Vocab, cap), Dim: t.Dim, Optimizer: ps.SGD,
			LearningRate: 0.05, InitScale: 0.05, InitSeed: 1})
	}
	batch := o.CaughtUpChips * o.BatchPerChip
	res := &PSResult{Tables: len(tables), Servers: o.PSServers, Cores: o.PSCores, Batch: batch, Steps: o.PSSteps, VocabCap: cap}
	f, err := features(sc.Tables)
	if err != nil {
		return nil, err
	}
	// The TPU side of a caught-up step: the dense model's FLOPs on the
	// caught-up slice, at the chip's peak (unscaled time).
	dev := steptime.Model{Chips: o.CaughtUpChips}
	tpu := dev.Step(steptime.Work{FLOPs: 6 * sc.DenseWeights * float64(batch)}).TensorCore
	res.TPUms = float64(tpu.Microseconds()) / 1e3

	gen := generator{prod: sc.Prod, seed: sc.Spec.Seed<<8 | 3}
	steps := make([]ps.Batch, o.PSSteps+1) // the first step warms up
	grads := make([]ps.Grads, o.PSSteps+1)
	for s := range steps {
		b := gen.batch(f, uint64(s), batch)
		steps[s], grads[s] = splitCores(b, tables, o.PSCores)
	}
	modes := []ps.Mode{ps.Uncoalesced, ps.Coalesced}
	clients := make([]*ps.Client, len(modes))
	counters := make([][]*ps.Server, len(modes))
	for i, mode := range modes {
		conns, servers, stop, err := startServers(o.PSServers)
		if err != nil {
			return nil, err
		}
		defer stop()
		counters[i] = servers
		c, err := ps.NewClient(ctx, conns, ps.ClientConfig{Tables: tables, Mode: mode, Cores: o.PSCores})
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	elapsed := make([]time.Duration, len(modes))
	rpcs := make([]int64, len(modes))
	for s := range steps {
		for i, c := range clients {
			before := servedRPCs(counters[i])
			t0 := time.Now()
			fetched, err := c.Lookup(ctx, steps[s])
			if err != nil {
				return nil, err
			}
			if err := c.Apply(ctx, fetched, grads[s]); err != nil {
				return nil, err
			}
			if s == 0 {
				continue
			}
			elapsed[i] += time.Since(t0)
			rpcs[i] += servedRPCs(counters[i]) - before
		}
	}
	out := make([]PSMode, len(modes))
	for i, mode := range modes {
		out[i] = PSMode{Mode: mode.String(), PSMS: float64(elapsed[i].Microseconds()) / 1e3 / float64(o.PSSteps),
			RPCs: float64(rpcs[i]) / float64(o.PSSteps)}
		out[i].StepMS = out[i].PSMS + res.TPUms
	}
	res.Uncoalesced, res.Coalesced = out[0], out[1]
	res.Speedup = out[0].StepMS / out[1].StepMS
	res.PSSpeedup = out[0].PSMS / out[1].PSMS
	return res, nil
}

// servedRPCs is the Lookup and Apply RPCs the servers have served.
func servedRPCs(servers []*ps.Server) int64 {
	var n int64
	for _, srv := range servers {
		st := srv.Stats()
		n += st.LookupRPCs + st.ApplyRPCs
	}
	return n
}

// splitCores deals a batch's examples to cores round-robin and gives every
// looked-up position a small deterministic gradient.
func splitCores(b *model.Examples, tables []ps.Table, cores int) (ps.Batch, ps.Grads) {
	bt, gr := make(ps.Batch, cores), make(ps.Grads, cores)
	for c := range cores {
		bt[c], gr[c] = make([][]int64, len(tables)), make([][]float32, len(tables))
	}
	for t, tb := range tables {
		col := &b.Sparse[t]
		for j := 0; j < b.Len(); j++ {
			c := j % cores
			for _, id := range col.IDs[col.Offsets[j]:col.Offsets[j+1]] {
				bt[c][t] = append(bt[c][t], int64(id%uint64(tb.Vocab)))
			}
		}
		for c := range cores {
			g := make([]float32, len(bt[c][t])*tb.Dim)
			for i := range g {
				g[i] = float32(int(mix(uint64(i)+uint64(t)<<32)%201)-100) * 1e-4
			}
			gr[c][t] = g
		}
	}
	return bt, gr
}

// startServers starts n parameter servers on loopback gRPC.
func startServers(n int) ([]grpc.ClientConnInterface, []*ps.Server, func(), error) {
	var conns []grpc.ClientConnInterface
	var servers []*ps.Server
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	for i := 0; i < n; i++ {
		s, err := ps.NewServer(context.Background(), ps.Config{Shard: i, Shards: n})
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		g := ps.NewGRPCServer(s, nil)
		go func() { _ = g.Serve(lis) }()
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			g.Stop()
			stop()
			return nil, nil, nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		stops = append(stops, func() { cc.Close(); g.Stop() })
		conns, servers = append(conns, cc), append(servers, s)
	}
	return conns, servers, stop, nil
}
