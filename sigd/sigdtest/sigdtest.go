package sigdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"google.golang.org/grpc"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/compact"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Bucket is the bucket every harness warehouse uses.
const Bucket = "sig"

// Epoch is the start of the first block's window: 2026-01-01 UTC.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// WarehouseConfig sizes a Warehouse.
type WarehouseConfig struct {
	// Blocks raw blocks of RowsPerBlock events each (default 1000), one
	// hourly window per block. Zero writes none (sigd ingests them).
	Blocks, RowsPerBlock int
	// Seed of the event generator.
	Seed uint64
	// MinIODir, if set, holds MinIO's data (benchmarks put it in
	// /dev/shm); default a test temporary directory.
	MinIODir string
	// MinIORandomETags runs MinIO without MD5 ETags
	// (devenv.MinIOConfig.RandomETags; benchmarks).
	MinIORandomETags bool
}

// Warehouse is a real MinIO with raw blocks, and a kfake cluster.
type Warehouse struct {
	MinIO *devenv.MinIO
	Kafka *devenv.Kafka
	Store *objstore.Store
	// Blocks are the raw blocks written, in event order.
	Blocks []block.Meta

	cfg  WarehouseConfig
	gen  *gen.Generator
	next int64 // Kafka offset of the next block's first record
}

// NewWarehouse starts MinIO and kfake and writes cfg.Blocks raw blocks.
func NewWarehouse(tb testing.TB, cfg WarehouseConfig) *Warehouse {
	tb.Helper()
	if cfg.RowsPerBlock <= 0 {
		cfg.RowsPerBlock = 1000
	}
	w := &Warehouse{cfg: cfg, gen: gen.New(gen.Config{Seed: cfg.Seed, LateFraction: -1})}
	if cfg.MinIODir != "" || cfg.MinIORandomETags {
		dir := cfg.MinIODir
		if dir == "" {
			dir = tb.TempDir()
		}
		m, err := devenv.StartMinIO(context.Background(), devenv.MinIOConfig{Dir: dir, RandomETags: cfg.MinIORandomETags})
		if err != nil {
			tb.Fatalf("sigdtest: %v", err)
		}
		tb.Cleanup(m.Stop)
		w.MinIO = m
	} else {
		w.MinIO = devenv.NewMinIO(tb)
	}
	w.Kafka = devenv.NewKafka(tb, devenv.KafkaConfig{})
	st, err := objstore.New(objstore.Config{Endpoint: w.MinIO.Endpoint, AccessKey: w.MinIO.AccessKey,
		SecretKey: w.MinIO.SecretKey, Bucket: Bucket, RetryFor: 10 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.EnsureBucket(context.Background()); err != nil {
		tb.Fatal(err)
	}
	w.Store = st
	w.AddBlocks(tb, cfg.Blocks)
	return w
}

// AddBlocks writes n more raw blocks (the next events of the generator, one
// hourly window each) and returns them. Catalogue them with Catalog or a
// running server's Catalog().Add.
func (w *Warehouse) AddBlocks(tb testing.TB, n int) []block.Meta {
	tb.Helper()
	ctx := context.Background()
	s := transform.AdsSchema()
	hour := int64(time.Hour / time.Microsecond)
	var out []block.Meta
	for range n {
		i := len(w.Blocks)
		rec := w.gen.Records(w.cfg.RowsPerBlock, w.cfg.RowsPerBlock)[0]
		// Each block gets its own window, so block i covers window i
		// whatever the event times (the events themselves are minutes
		// apart; the window is what read ranges select).
		window := Epoch.Add(time.Duration(i) * time.Hour).UnixMicro()
		kr := block.KafkaRange{Topic: "raw.ads", Partition: 0, First: w.next, Last: w.next + int64(w.cfg.RowsPerBlock) - 1}
		w.next += int64(w.cfg.RowsPerBlock)
		id := block.ID(window, kr)
		shifted := shiftTimes(rec, window)
		rec.Release()
		meta, err := block.Write(ctx, w.Store, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
			WindowStart: window, WindowLength: hour, SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, shifted)
		shifted.Release()
		if err != nil {
			tb.Fatalf("sigdtest: write raw block: %v", err)
		}
		w.Blocks = append(w.Blocks, meta)
		out = append(out, meta)
	}
	return out
}

// AddWindow writes n small raw blocks of rows events each, the next
// events of the generator, all of one new hourly window and of one Kafka
// partition with contiguous offsets, as ingestion sealing often (--seal-after)
// cuts them: what compaction merges (Compact). They are appended to Blocks
// and returned; catalogue them as AddBlocks' are.
func (w *Warehouse) AddWindow(tb testing.TB, n, rows int) []block.Meta {
	tb.Helper()
	ctx := context.Background()
	s := transform.AdsSchema()
	hour := int64(time.Hour / time.Microsecond)
	window := Epoch.Add(time.Duration(len(w.Blocks)) * time.Hour).UnixMicro()
	var out []block.Meta
	for i := range n {
		rec := w.gen.Records(rows, rows)[0]
		kr := block.KafkaRange{Topic: "raw.ads", Partition: 0, First: w.next, Last: w.next + int64(rows) - 1}
		w.next += int64(rows)
		id := block.ID(window, kr)
		// The window's events in order, block after block, a
		// millisecond apart.
		shifted := linearTimes(rec, window+int64(i*rows)*1000)
		rec.Release()
		meta, err := block.Write(ctx, w.Store, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
			WindowStart: window, WindowLength: hour, SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, shifted)
		shifted.Release()
		if err != nil {
			tb.Fatalf("sigdtest: write raw block: %v", err)
		}
		out = append(out, meta)
	}
	w.Blocks = append(w.Blocks, out...)
	return out
}

// Compact compacts parts (blocks of one window and partition, consecutive,
// at their catalogued versions in cat) as ingestion's compactor does:
// writes the compacted block's object (compact.Meta, compact.Concat), then
// commits it with the parts' tombstones (catalog.Compact). It returns the
// compacted block as catalogued, and appends it to Blocks.
func (w *Warehouse) Compact(tb testing.TB, cat *catalog.Catalog, parts []block.Meta) block.Meta {
	tb.Helper()
	ctx := context.Background()
	cm, err := compact.Meta(parts, 2)
	if err != nil {
		tb.Fatalf("sigdtest: %v", err)
	}
	var recs []arrow.Record
	for _, p := range parts {
		_, rec, err := block.ReadBlock(ctx, w.Store, p.Key)
		if err != nil {
			tb.Fatalf("sigdtest: part %s: %v", p.Key, err)
		}
		defer rec.Release()
		recs = append(recs, rec)
	}
	all, err := compact.Concat(recs)
	if err != nil {
		tb.Fatalf("sigdtest: %v", err)
	}
	defer all.Release()
	m, err := block.Write(ctx, w.Store, cm, all)
	if err != nil {
		tb.Fatalf("sigdtest: write the compacted block: %v", err)
	}
	if err := cat.Compact(m); err != nil {
		tb.Fatalf("sigdtest: %v", err)
	}
	if m, err = cat.Get(m.Source, m.ID); err != nil {
		tb.Fatalf("sigdtest: %v", err)
	}
	w.Blocks = append(w.Blocks, m)
	return m
}

// linearTimes returns rec with event times from t on, a millisecond apart.
func linearTimes(rec arrow.Record, t int64) arrow.Record {
	idx := rec.Schema().FieldIndices(transform.ColEventTime)[0]
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rec.NumRows() {
		b.Append(t + i*1000)
	}
	col := b.NewArray()
	defer col.Release()
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = rec.Column(i)
	}
	cols[idx] = col
	return array.NewRecord(rec.Schema(), cols, rec.NumRows())
}

// shiftTimes returns rec with event times moved into the hour starting at
// window, keeping their spacing, so that block i holds the events of
// window i.
func shiftTimes(rec arrow.Record, window int64) arrow.Record {
	idx := rec.Schema().FieldIndices(transform.ColEventTime)[0]
	old := rec.Column(idx).(*array.Int64)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	base := old.Value(0)
	for i := 0; i < old.Len(); i++ {
		b.Append(window + (old.Value(i)-base)%int64(time.Hour/time.Microsecond))
	}
	col := b.NewArray()
	defer col.Release()
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = rec.Column(i)
	}
	cols[idx] = col
	return array.NewRecord(rec.Schema(), cols, rec.NumRows())
}

// Range is the event range [from, to) of blocks [first, last).
func (w *Warehouse) Range(first, last int) *sigv1.EventRange {
	return &sigv1.EventRange{StartMicros: w.Blocks[first].WindowStart, EndMicros: w.Blocks[last-1].WindowStart + w.Blocks[last-1].WindowLength}
}

// All is the event range of every block written so far.
func (w *Warehouse) All() *sigv1.EventRange { return w.Range(0, len(w.Blocks)) }

// Catalog records the warehouse's blocks in the catalog of a sigd data
// directory that no server has open.
func (w *Warehouse) Catalog(tb testing.TB, dataDir string) {
	tb.Helper()
	c, err := catalog.Open(filepath.Join(dataDir, "catalog"))
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	for _, m := range w.Blocks {
		if err := c.Add(m); err != nil {
			tb.Fatal(err)
		}
	}
}

// S3Args are the sigd flags that point at the warehouse's MinIO and Kafka.
func (w *Warehouse) S3Args() []string {
	return []string{"--s3-endpoint", w.MinIO.Endpoint, "--s3-access-key", w.MinIO.AccessKey,
		"--s3-secret-key", w.MinIO.SecretKey, "--s3-bucket", Bucket}
}

// ----------------------------------------------------------------- tokens

// Principals of the token file. Clients are named as the fleet's models.
var Principals = []auth.Principal{
	{Name: "ctr", Role: auth.RoleClient, Client: "ctr"},
	{Name: "cvr", Role: auth.RoleClient, Client: "cvr"},
	{Name: "ranking", Role: auth.RoleClient, Client: "ranking"},
	{Name: "explore", Role: auth.RoleClient, Client: "explore"},
	{Name: "operator", Role: auth.RoleOperator},
	{Name: "worker", Role: auth.RoleWorker},
	{Name: "reader", Role: auth.RoleReader},
	{Name: "trainer", Role: auth.RoleTrainer, Client: "ctr"},
}

// Tokens maps principal names to their tokens.
type Tokens map[string]string

// WriteTokens writes a token file for Principals into dir.
func WriteTokens(tb testing.TB, dir string) (string, Tokens) {
	tb.Helper()
	toks := Tokens{}
	var f auth.File
	for i, p := range Principals {
		tok := fmt.Sprintf("%s-token-%d-%d", p.Name, i, time.Now().UnixNano())
		toks[p.Name] = tok
		f.Tokens = append(f.Tokens, auth.Entry{Token: tok, Principal: p})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path, toks
}

// ----------------------------------------------------------------- server

// Server is a sigd.Server serving in the test process.
type Server struct {
	*sigd.Server
	DataDir string
	Tokens  Tokens
	// Logs is what the server logged (shown when the test fails).
	Logs *SyncBuffer

	stop context.CancelFunc
	done chan error
}

// Start catalogues the warehouse's blocks in a fresh data directory and
// serves sigd on 127.0.0.1 ports with the warehouse's MinIO and Kafka. cfg
// may set anything else (its endpoints, data directory, tokens and listen
// addresses are filled in). The server stops when the test ends.
func Start(tb testing.TB, w *Warehouse, cfg sigd.Config, opts sigd.Options) *Server {
	tb.Helper()
	dir := tb.TempDir()
	w.Catalog(tb, dir)
	return StartIn(tb, w, dir, cfg, opts)
}

// StartIn is Start on an existing data directory (a restart).
func StartIn(tb testing.TB, w *Warehouse, dir string, cfg sigd.Config, opts sigd.Options) *Server {
	tb.Helper()
	tokPath, toks := WriteTokens(tb, tb.TempDir())
	cfg.DataDir = dir
	cfg.TokensFile = tokPath
	cfg.Listen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.S3Endpoint, cfg.S3AccessKey, cfg.S3SecretKey, cfg.S3Bucket = w.MinIO.Endpoint, w.MinIO.AccessKey, w.MinIO.SecretKey, Bucket
	cfg.KafkaBrokers = w.Kafka.Brokers
	logs := &SyncBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sigd.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		tb.Fatalf("sigdtest: sigd.New: %v", err)
	}
	s := &Server{Server: srv, DataDir: dir, Tokens: toks, Logs: logs, stop: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { s.done <- srv.Serve(ctx, ready) }()
	select {
	case <-ready:
	case err := <-s.done:
		cancel()
		srv.Close()
		tb.Fatalf("sigdtest: Serve: %v", err)
	}
	tb.Cleanup(func() {
		s.Stop(tb)
		if tb.Failed() {
			tb.Logf("sigd log tail:\n%s", tail(logs.String(), 6000))
		}
	})
	return s
}

// Stop shuts the server down gracefully and closes it (idempotent).
func (s *Server) Stop(tb testing.TB) {
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	select {
	case err := <-s.done:
		if err != nil {
			tb.Errorf("sigdtest: Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		tb.Errorf("sigdtest: sigd did not stop within 30s")
	}
	s.Close()
}

// Dial connects to the server as the named principal ("" sends no token).
func (s *Server) Dial(tb testing.TB, principal string) *grpc.ClientConn {
	tb.Helper()
	return Dial(tb, s.Addr(), s.token(tb, principal))
}

// SIG returns a SIG client acting as the named principal.
func (s *Server) SIG(tb testing.TB, principal string) sigv1.SIGClient {
	return sigv1.NewSIGClient(s.Dial(tb, principal))
}

// Workers returns a lease protocol client acting as the named principal.
func (s *Server) Workers(tb testing.TB, principal string) sigv1.WorkersClient {
	return sigv1.NewWorkersClient(s.Dial(tb, principal))
}

func (s *Server) token(tb testing.TB, principal string) string {
	if principal == "" {
		return ""
	}
	t, ok := s.Tokens[principal]
	if !ok {
		tb.Fatalf("sigdtest: no principal %q", principal)
	}
	return t
}

// Dial connects to a sigd address with a token ("" for none), the way
// sigctl does, and closes the connection when the test ends.
func Dial(tb testing.TB, addr, token string) *grpc.ClientConn {
	tb.Helper()
	cc, err := cli.Dial(addr, token, false)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// ----------------------------------------------------------------- graphs

// DSL returns a graph of examples/fleet by name ("ctr_small", "cvr", ...).
func DSL(tb testing.TB, name string) string {
	tb.Helper()
	root := repoRoot(tb)
	b, err := os.ReadFile(filepath.Join(root, "examples", "fleet", name+".sig"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// Submit is a SubmitGraph request of a DSL graph over the ads source.
func Submit(client, pipeline string, prio int32, dsl string, r *sigv1.EventRange) *sigv1.SubmitGraphRequest {
	return &sigv1.SubmitGraphRequest{Client: client, Pipeline: pipeline, Priority: prio, Range: r,
		Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: dsl}, RawSource: "ads"}}
}

// WaitComplete follows a pipeline's read solution with WatchReadSolution
// until it is complete and returns it. It fails the test if the stream ends
// otherwise or ctx expires.
func WaitComplete(ctx context.Context, tb testing.TB, c sigv1.SIGClient, client, pipeline string) *sigv1.ReadSolution {
	tb.Helper()
	st, err := c.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: client, Pipeline: pipeline})
	if err != nil {
		tb.Fatalf("watch %s/%s: %v", client, pipeline, err)
	}
	var last *sigv1.ReadSolution
	for {
		up, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatalf("watch %s/%s: %v (last solution: %d ready, %d pending, %d failed)", client, pipeline, err,
				last.GetBlocksReady(), last.GetBlocksPending(), last.GetBlocksFailed())
		}
		if up.Solution != nil {
			last = up.Solution
		}
	}
	if last == nil || !last.Complete {
		tb.Fatalf("watch %s/%s ended without a complete solution: %v", client, pipeline, last)
	}
	return last
}

// ------------------------------------------------------------------ logs

// SyncBuffer is devenv's: a bytes.Buffer safe for concurrent writers.
type SyncBuffer = devenv.SyncBuffer

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// InputKey returns the component of a named model input.
func InputKey(tb testing.TB, sol *sigv1.ReadSolution, input string) canon.Key {
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
