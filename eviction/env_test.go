package eviction_test

// The eviction suite's environment: a sigd serving in the test process on a
// real MinIO and kfake (internal/devenv), with raw blocks of Ads events
// written straight into its warehouse, a token file, gRPC clients per
// principal, and checks of the matching cache against the bucket.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/workers"
)

// epoch is the event time of the first block's window.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// principals of the token file.
var principals = []auth.Principal{
	{Name: "alice", Role: auth.RoleOperator},
	{Name: "worker-pool", Role: auth.RoleWorker},
	{Name: "ctr", Role: auth.RoleClient, Client: "ctr"},
	{Name: "cvr", Role: auth.RoleClient, Client: "cvr"},
	{Name: "explore", Role: auth.RoleClient, Client: "explore"},
	{Name: "trainer", Role: auth.RoleTrainer, Client: "ctr"},
}

const operator = "alice"

// Pipelines of the suite. xssPipeline is a legal pipeline name (free text)
// that a careless UI would execute.
const (
	xssPipeline = "<script>alert(1)</script>"
	// faultySubgraph is what the tests evict: the query tokenizer.
	faultySubgraph = `unigrams(lower(col("query")))`
)

// ctrDSL has two components containing faultySubgraph (qa_overlap,
// query_ids) and one that does not (price_bin).
const ctrDSL = `let q = unigrams(lower(col("query")))
let t = unigrams(lower(col("ad_title")))
input qa_overlap = concat(intersect(q, t), col("ad_category"))
input query_ids  = hash(q, buckets=1000003)
input price_bin  = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
`

// cvrDSL shares the faulty subgraph through a component of its own.
const cvrDSL = `input q_small = hash(unigrams(lower(col("query"))), buckets=1000)
input log_price = log1p(col("bid_price"))
`

// exploreDSL does not touch the faulty subgraph.
const exploreDSL = `input adv = hash(col("advertiser_id"), buckets=100)
`

type envConfig struct {
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
}

type env struct {
	tb     testing.TB
	srv    *sigd.Server
	minio  *devenv.MinIO
	kafka  *devenv.Kafka
	blocks []block.Meta
	tokens map[string]string
	logs   *syncBuffer
	ctx    context.Context
}

func newEnv(tb testing.TB, cfg envConfig) *env {
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
	m := devenv.NewMinIO(tb)
	k := devenv.NewKafka(tb, devenv.KafkaConfig{})
	dir := tb.TempDir()
	e := &env{tb: tb, minio: m, kafka: k, tokens: map[string]string{}, logs: &syncBuffer{}}
	var f auth.File
	for i, p := range principals {
		tok := fmt.Sprintf("%s-token-%02d-%s", p.Name, i, strings.Repeat("x", 16))
		e.tokens[p.Name] = tok
		f.Tokens = append(f.Tokens, auth.Entry{Token: tok, Principal: p})
	}
	b, _ := json.Marshal(f)
	tokPath := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokPath, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	srv, err := sigd.New(ctx, sigd.Config{
		DataDir: filepath.Join(dir, "data"), S3Endpoint: m.Endpoint, S3AccessKey: m.AccessKey, S3SecretKey: m.SecretKey,
		KafkaBrokers: k.Brokers, TokensFile: tokPath, Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		WorkersMin: cfg.Workers, WorkersMax: cfg.Workers, Lease: 10 * time.Second,
		EvictTTL: cfg.EvictTTL, EvictInterval: cfg.EvictInterval,
	}, sigd.Options{Clock: cfg.Clock, WrapRunner: cfg.WrapRunner, UISampleEvery: cfg.UISampleEvery,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		cancel()
		tb.Fatalf("sigd.New: %v", err)
	}
	e.srv = srv
	e.writeBlocks(cfg.Blocks, cfg.Rows)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ready) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		srv.Close()
		tb.Fatalf("sigd Serve: %v", err)
	}
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("sigd Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("sigd did not stop within 30s")
		}
		srv.Close()
		if tb.Failed() {
			l := e.logs.String()
			tb.Logf("sigd log tail:\n%s", l[max(0, len(l)-8000):])
		}
	})
	return e
}

// writeBlocks writes n raw blocks of rows events, one hourly window each,
// as ingestion writes them, and catalogues them.
func (e *env) writeBlocks(n, rows int) {
	tb := e.tb
	s := transform.AdsSchema()
	hour := int64(time.Hour / time.Microsecond)
	for i := range n {
		start := epoch.Add(time.Duration(i) * time.Hour)
		g := gen.New(gen.Config{Seed: uint64(i + 1), Start: start, LateFraction: -1, FirstEventID: int64(i*rows + 1)})
		rec := g.Records(rows, rows)[0]
		kr := block.KafkaRange{Topic: "raw.ads", Partition: 0, First: int64(i * rows), Last: int64((i+1)*rows - 1)}
		id := block.ID(start.UnixMicro(), kr)
		meta, err := block.Write(context.Background(), e.srv.Store(), block.Meta{Key: block.RawKey("ads", id), ID: id,
			Source: "ads", WindowStart: start.UnixMicro(), WindowLength: hour, SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, rec)
		rec.Release()
		if err != nil {
			tb.Fatalf("write raw block: %v", err)
		}
		if err := e.srv.Catalog().Add(meta); err != nil {
			tb.Fatalf("catalog: %v", err)
		}
		e.blocks = append(e.blocks, meta)
	}
}

// all is the event range of every block.
func (e *env) all() *sigv1.EventRange {
	last := e.blocks[len(e.blocks)-1]
	return &sigv1.EventRange{StartMicros: e.blocks[0].WindowStart, EndMicros: last.WindowStart + last.WindowLength}
}

// sig returns a SIG client acting as the named principal ("" for none).
func (e *env) sig(principal string) sigv1.SIGClient {
	e.tb.Helper()
	tok := ""
	if principal != "" {
		var ok bool
		if tok, ok = e.tokens[principal]; !ok {
			e.tb.Fatalf("no principal %q", principal)
		}
	}
	cc, err := cli.Dial(e.srv.Addr(), tok, false)
	if err != nil {
		e.tb.Fatal(err)
	}
	e.tb.Cleanup(func() { cc.Close() })
	return sigv1.NewSIGClient(cc)
}

func (e *env) submit(client, pipeline, dsl string) *sigv1.SubmitGraphResponse {
	e.tb.Helper()
	resp, err := e.sig(client).SubmitGraph(e.ctx, &sigv1.SubmitGraphRequest{Client: client, Pipeline: pipeline, Range: e.all(),
		Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: dsl}, RawSource: "ads"}})
	if err != nil {
		e.tb.Fatalf("submit %s/%s: %v", client, pipeline, err)
	}
	return resp
}

// pipelines submits the suite's three pipelines and waits until their
// solutions are complete.
func (e *env) pipelines() {
	e.tb.Helper()
	e.submit("ctr", "ctr-small", ctrDSL)
	e.submit("cvr", xssPipeline, cvrDSL)
	e.submit("explore", "explore", exploreDSL)
	e.waitComplete("ctr", "ctr-small")
	e.waitComplete("cvr", xssPipeline)
	e.waitComplete("explore", "explore")
}

// solution reads a pipeline's read solution (which re-creates evicted
// entries pending and schedules them).
func (e *env) solution(client, pipeline string) *sigv1.ReadSolution {
	e.tb.Helper()
	sol, err := e.sig(client).GetReadSolution(e.ctx, &sigv1.GetReadSolutionRequest{Client: client, Pipeline: pipeline})
	if err != nil {
		e.tb.Fatalf("read solution %s/%s: %v", client, pipeline, err)
	}
	return sol
}

// waitComplete follows a pipeline's solution until it is complete.
func (e *env) waitComplete(client, pipeline string) *sigv1.ReadSolution {
	e.tb.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	st, err := e.sig(client).WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: client, Pipeline: pipeline})
	if err != nil {
		e.tb.Fatalf("watch %s/%s: %v", client, pipeline, err)
	}
	var last *sigv1.ReadSolution
	for {
		up, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			e.tb.Fatalf("watch %s/%s: %v (last: %d ready, %d pending, %d failed)", client, pipeline, err,
				last.GetBlocksReady(), last.GetBlocksPending(), last.GetBlocksFailed())
		}
		if up.Solution != nil {
			last = up.Solution
		}
	}
	if !last.GetComplete() {
		e.tb.Fatalf("watch %s/%s ended incomplete: %v", client, pipeline, last)
	}
	return last
}

// components returns the distinct component keys of a solution.
func components(sol *sigv1.ReadSolution) []canon.Key {
	seen := map[string]bool{}
	var out []canon.Key
	for _, in := range sol.Inputs {
		if seen[in.ComponentKey] {
			continue
		}
		seen[in.ComponentKey] = true
		k, err := canon.ParseKey(in.ComponentKey)
		if err != nil {
			panic(err)
		}
		out = append(out, k)
	}
	return out
}

// inputKey returns the component of a named model input.
func inputKey(tb testing.TB, sol *sigv1.ReadSolution, input string) canon.Key {
	tb.Helper()
	for _, in := range sol.Inputs {
		if in.Input == input {
			k, err := canon.ParseKey(in.ComponentKey)
			if err != nil {
				tb.Fatal(err)
			}
			return k
		}
	}
	tb.Fatalf("no input %q in %s/%s", input, sol.Client, sol.Pipeline)
	return canon.Key{}
}

// objects lists the memo objects of a component in the bucket.
func (e *env) objects(k canon.Key) []string {
	e.tb.Helper()
	var out []string
	for info, err := range e.srv.Store().List(e.ctx, "memo/"+k.String()+"/") {
		if err != nil {
			e.tb.Fatal(err)
		}
		out = append(out, info.Key)
	}
	sort.Strings(out)
	return out
}

// memos returns a component's memo entries by state.
func (e *env) memos(k canon.Key) map[matching.MemoState]int {
	e.tb.Helper()
	ms, err := e.srv.Frontend().Cache().Memos(k)
	if err != nil {
		e.tb.Fatal(err)
	}
	out := map[matching.MemoState]int{}
	for _, m := range ms {
		out[m.State]++
	}
	return out
}

// checkMemoized asserts that every block of k is ready with its object.
func (e *env) checkMemoized(k canon.Key) {
	e.tb.Helper()
	n := len(e.blocks)
	if got := e.memos(k); got[matching.MemoReady] != n || len(got) != 1 {
		e.tb.Errorf("component %s: entries %v, want %d ready", k.Short(), got, n)
	}
	if got := e.objects(k); len(got) != n {
		e.tb.Errorf("component %s: %d memo objects, want %d", k.Short(), len(got), n)
	}
}

// checkEvicted asserts that k has neither entries nor objects.
func (e *env) checkEvicted(k canon.Key) {
	e.tb.Helper()
	if got := e.memos(k); len(got) != 0 {
		e.tb.Errorf("component %s: entries %v after eviction, want none", k.Short(), got)
	}
	if got := e.objects(k); len(got) != 0 {
		e.tb.Errorf("component %s: objects %v after eviction, want none", k.Short(), got)
	}
}

// pendingBlocks counts the blocks of a solution's inputs on components ks
// that are pending.
func pendingBlocks(sol *sigv1.ReadSolution, ks ...canon.Key) int {
	n := 0
	for _, in := range sol.Inputs {
		for _, k := range ks {
			if in.ComponentKey != k.String() {
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

// syncBuffer is a bytes.Buffer safe for concurrent writers (sigd's log).
type syncBuffer = sigdtest.SyncBuffer
