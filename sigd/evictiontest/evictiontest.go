package evictiontest

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
)

// Operator is the principal (sigdtest.Principals) that evicts and logs in
// to the web UI.
const Operator = "operator"

// Pipelines of the suite. XSSPipeline is a legal pipeline name (free text)
// that a careless UI would execute.
const (
	XSSPipeline = "<script>alert(1)</script>"
	// FaultySubgraph is what the tests evict: the query tokenizer.
	FaultySubgraph = `unigrams(lower(col("query")))`
)

// CtrDSL has two components containing FaultySubgraph (qa_overlap,
// query_ids) and one that does not (price_bin).
const CtrDSL = `let q = unigrams(lower(col("query")))
let t = unigrams(lower(col("ad_title")))
input qa_overlap = concat(intersect(q, t), col("ad_category"))
input query_ids  = hash(q, buckets=1000003)
input price_bin  = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
`

// CvrDSL shares the faulty subgraph through a component of its own.
const CvrDSL = `input q_small = hash(unigrams(lower(col("query"))), buckets=1000)
input log_price = log1p(col("bid_price"))
`

// ExploreDSL does not touch the faulty subgraph.
const ExploreDSL = `input adv = hash(col("advertiser_id"), buckets=100)
`

// Config sizes an Env.
type Config struct {
	Blocks, Rows int // raw blocks (default 3) of Rows events (default 500)
	Clock        clock.Clock
	Workers      int // in-process workers, fixed (default 2)
	EvictTTL     time.Duration
	// EvictInterval of the TTL loop; default a day, so that tests run
	// rounds by hand.
	EvictInterval time.Duration
	WrapRunner    func(workers.Runner) workers.Runner
	// UISampleEvery is the web UI charts' period (default sigd's, 5s).
	UISampleEvery time.Duration
	// Insertion is sigd's insertion policy (default sigd's, every
	// component memoized whole).
	Insertion string
	// ReportsDir is sigd's --reports (the web UI's bench reports).
	ReportsDir string
}

// Env is a sigd with its warehouse (whose Blocks, All and Kafka it
// shows). Srv.Tokens holds the principals' tokens, Srv.Logs what sigd
// logged (shown when the test fails).
type Env struct {
	*sigdtest.Warehouse
	Srv *sigdtest.Server
	TB  testing.TB
	// Ctx ends when the test does.
	Ctx context.Context
}

// New starts MinIO, kfake and a sigd serving on 127.0.0.1 ports, with
// cfg.Blocks raw blocks catalogued. Everything stops when the test ends.
func New(tb testing.TB, cfg Config) *Env {
	tb.Helper()
	if cfg.Blocks == 0 {
		cfg.Blocks = 3
	}
	if cfg.Rows == 0 {
		cfg.Rows = 500
	}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.EvictInterval == 0 {
		cfg.EvictInterval = 24 * time.Hour
	}
	w := sigdtest.NewWarehouse(tb, sigdtest.WarehouseConfig{Blocks: cfg.Blocks, RowsPerBlock: cfg.Rows})
	srv := sigdtest.Start(tb, w, sigd.Config{
		WorkersMin: cfg.Workers, WorkersMax: cfg.Workers, Lease: 10 * time.Second,
		EvictTTL: cfg.EvictTTL, EvictInterval: cfg.EvictInterval, Insertion: cfg.Insertion, ReportsDir: cfg.ReportsDir,
	}, sigd.Options{Clock: cfg.Clock, WrapRunner: cfg.WrapRunner, UISampleEvery: cfg.UISampleEvery})
	return &Env{Warehouse: w, Srv: srv, TB: tb, Ctx: tb.Context()}
}

// SIG returns a SIG client acting as the named principal ("" for none).
func (e *Env) SIG(principal string) sigv1.SIGClient {
	e.TB.Helper()
	return e.Srv.SIG(e.TB, principal)
}

// Submit submits a DSL graph over every block as client's pipeline.
func (e *Env) Submit(client, pipeline, dsl string) *sigv1.SubmitGraphResponse {
	e.TB.Helper()
	resp, err := e.SIG(client).SubmitGraph(e.Ctx, sigdtest.Submit(client, pipeline, 0, dsl, e.All()))
	if err != nil {
		e.TB.Fatalf("submit %s/%s: %v", client, pipeline, err)
	}
	return resp
}

// Pipelines submits the suite's three pipelines and waits until their
// solutions are complete.
func (e *Env) Pipelines() {
	e.TB.Helper()
	e.Submit("ctr", "ctr-small", CtrDSL)
	e.Submit("cvr", XSSPipeline, CvrDSL)
	e.Submit("explore", "explore", ExploreDSL)
	e.WaitComplete("ctr", "ctr-small")
	e.WaitComplete("cvr", XSSPipeline)
	e.WaitComplete("explore", "explore")
}

// Solution reads a pipeline's read solution (which re-creates evicted
// entries pending and schedules them).
func (e *Env) Solution(client, pipeline string) *sigv1.ReadSolution {
	e.TB.Helper()
	sol, err := e.SIG(client).GetReadSolution(e.Ctx, &sigv1.GetReadSolutionRequest{Client: client, Pipeline: pipeline})
	if err != nil {
		e.TB.Fatalf("read solution %s/%s: %v", client, pipeline, err)
	}
	return sol
}

// WaitComplete follows a pipeline's solution until it is complete.
func (e *Env) WaitComplete(client, pipeline string) *sigv1.ReadSolution {
	e.TB.Helper()
	ctx, cancel := context.WithTimeout(e.Ctx, 60*time.Second)
	defer cancel()
	return sigdtest.WaitComplete(ctx, e.TB, e.SIG(client), client, pipeline)
}

// Components returns the distinct component keys of a solution.
func Components(sol *sigv1.ReadSolution) []canon.Key {
	seen := map[canon.Key]bool{}
	var out []canon.Key
	for _, in := range sol.Inputs {
		k, err := canon.ParseKey(in.ComponentKey)
		if err != nil {
			panic(err)
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Objects lists the memo objects in the bucket that hold a component's
// data: its own objects (memo/<key>/, as written before packs) and the
// packs with a column of it (issue 28).
func (e *Env) Objects(k canon.Key) []string {
	e.TB.Helper()
	out := ObjectsOf(e.Ctx, e.TB, e.Srv.Store(), k)
	sort.Strings(out)
	return out
}

// ObjectsOf lists the memo objects in store that hold component k's data:
// its own objects and the packs with a column of it (their footers read).
func ObjectsOf(ctx context.Context, tb testing.TB, store *objstore.Store, k canon.Key) []string {
	tb.Helper()
	var out []string
	for info, err := range store.List(ctx, block.MemoComponentPrefix(k)) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, info.Key)
	}
	for info, err := range store.List(ctx, block.PackPrefix) {
		if err != nil {
			tb.Fatal(err)
		}
		meta, err := block.ReadFooter(ctx, store, info.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			tb.Fatal(err)
		}
		if _, ok := meta.Column(block.MemberColumn(k)); ok {
			out = append(out, info.Key)
		}
	}
	return out
}

// Memos returns a component's memo entries by state.
func (e *Env) Memos(k canon.Key) map[matching.MemoState]int {
	e.TB.Helper()
	ms, err := e.Srv.Frontend().Cache().Memos(k)
	if err != nil {
		e.TB.Fatal(err)
	}
	out := map[matching.MemoState]int{}
	for _, m := range ms {
		out[m.State]++
	}
	return out
}

// CheckMemoized asserts that every block of k is ready with its object.
func (e *Env) CheckMemoized(k canon.Key) {
	e.TB.Helper()
	n := len(e.Blocks)
	if got := e.Memos(k); got[matching.MemoReady] != n || len(got) != 1 {
		e.TB.Errorf("component %s: entries %v, want %d ready", k.Short(), got, n)
	}
	if got := e.Objects(k); len(got) != n {
		e.TB.Errorf("component %s: %d memo objects, want %d", k.Short(), len(got), n)
	}
}

// CheckEvicted asserts that k has neither entries nor objects.
func (e *Env) CheckEvicted(k canon.Key) {
	e.TB.Helper()
	if got := e.Memos(k); len(got) != 0 {
		e.TB.Errorf("component %s: entries %v after eviction, want none", k.Short(), got)
	}
	if got := e.Objects(k); len(got) != 0 {
		e.TB.Errorf("component %s: objects %v after eviction, want none", k.Short(), got)
	}
}

// PendingBlocks counts the blocks of a solution's inputs on components ks
// that are pending.
func PendingBlocks(sol *sigv1.ReadSolution, ks ...canon.Key) int {
	n := 0
	for _, in := range sol.Inputs {
		got, err := canon.ParseKey(in.ComponentKey)
		if err != nil {
			continue
		}
		for _, k := range ks {
			if got != k {
				continue
			}
			for _, b := range in.Blocks {
				if b.State == sigv1.BlockState_BLOCK_STATE_PENDING {
					n++
				}
			}
		}
	}
	return n
}
