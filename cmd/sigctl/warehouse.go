package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/internal/topics"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
)

func init() {
	commands.Register(cli.Command{Name: "gen", Run: runGen,
		Usage: "--kafka-brokers B [--topic T] | --out FILE.arrow; [--events N --seed S --start-time T]: generate Ads events"})
	commands.Register(cli.Command{Name: "ingest", Run: runIngest,
		Usage: "--kafka-brokers B --s3-endpoint E ... --catalog DIR: ingest raw.<source> into warehouse blocks"})
	commands.Register(cli.Command{Name: "warehouse", Run: runWarehouse,
		Usage: "rebuild-catalog --catalog DIR ... | list [--sigd ADDR --token T | --catalog DIR]: rebuild the block catalog from the bucket, or print it (a running sigd's through sigd)"})
}

// s3Flags are the object-store flags of the warehouse commands: the
// shared ones (cli.ObjectStoreFlags), and --bucket, the name these commands
// gave --s3-bucket before every command shared it, kept so that scripts
// using it still work.
type s3Flags struct{ cfg *objstore.Config }

func (f *s3Flags) register(fs *flag.FlagSet) {
	f.cfg = objstore.Flags(fs, "S3 endpoint host:port (required)")
	fs.StringVar(&f.cfg.Bucket, "bucket", f.cfg.Bucket, "the same as --s3-bucket")
}

func (f *s3Flags) open(logger *slog.Logger) (*objstore.Store, error) {
	if f.cfg.Endpoint == "" {
		return nil, fmt.Errorf("%w: --s3-endpoint is required", cli.ErrUsage)
	}
	c := *f.cfg
	c.Logger = logger
	return objstore.New(c)
}

func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("gen", stderr)
	var brokers cli.List
	fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka brokers to produce to")
	topic := fs.String("topic", ingest.TopicFor("ads"), "topic to produce to")
	out := fs.String("out", "", "write an Arrow IPC file instead of producing")
	events := fs.Int("events", 100_000, "number of events")
	seed := fs.Uint64("seed", 1, "random seed")
	start := fs.String("start-time", "2026-01-01T00:00:00Z", "event time of the first event (RFC 3339)")
	rate := fs.Float64("events-per-second", 100, "events per second of event time")
	late := fs.Float64("late-fraction", 0.001, "fraction of late events (negative: none)")
	firstID := fs.Int64("first-event-id", 1, "id of the first event")
	format := fs.String("format", "row", "record encoding: row (compact binary) or json")
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	if (len(brokers) == 0) == (*out == "") {
		return fmt.Errorf("%w: give exactly one of --kafka-brokers and --out", cli.ErrUsage)
	}
	t0, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return fmt.Errorf("%w: --start-time: %v", cli.ErrUsage, err)
	}
	if *events < 0 {
		return fmt.Errorf("%w: --events must be >= 0", cli.ErrUsage)
	}
	g := gen.New(gen.Config{Seed: *seed, Start: t0, EventsPerSecond: *rate, LateFraction: *late, FirstEventID: *firstID})
	if *out != "" {
		if err := g.WriteFile(*out, *events); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d events to %s\n", *events, *out)
		return nil
	}
	ct, err := recordFormat(*format)
	if err != nil {
		return err
	}
	cl, err := producer(ctx, brokers, *topic)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := g.Produce(ctx, cl, *topic, *events, ct); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "produced %d events to %s\n", *events, *topic)
	return nil
}

func loadSchema(source, path string) (*transform.Schema, error) {
	if path != "" {
		return transform.LoadSchema(path)
	}
	s := transform.AdsSchema()
	if source != s.Source {
		return nil, fmt.Errorf("%w: source %q has no built-in schema; give --schema FILE.json", cli.ErrUsage, source)
	}
	return s, nil
}

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("ingest", stderr)
	var s3 s3Flags
	s3.register(fs)
	var brokers cli.List
	fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka brokers")
	source := fs.String("source", "ads", "event source; consumes raw.<source>")
	schemaPath := fs.String("schema", "", "JSON schema file of the source (default: the built-in Ads schema)")
	catDir := fs.String("catalog", "", "block catalog directory (Pebble)")
	rows := fs.Int("rows-per-block", 0, "also seal a block at this many rows and changes (0: blocks are cut by --block-bytes alone)")
	blockBytes := fs.Int64("block-bytes", ingest.DefaultBlockBytes, "seal a block when its rows would encode to about this many bytes (before segment compression; negative: no byte bound)")
	compactBytes := fs.Int64("compact-bytes", 0, "compact the small blocks of a closed, quiet window into blocks of about this many bytes (0: --block-bytes)")
	compactQuiet := fs.Duration("compact-quiet", ingest.DefaultCompactQuiet, "compact a partition's window once it has had no new block or version this long (negative: never compact)")
	compactEvery := fs.Duration("compact-every", ingest.DefaultCompactEvery, "look for windows to compact this often")
	sealAfter := fs.Duration("seal-after", 30*time.Second, "seal a block this long after its first row")
	window := fs.Duration("window", time.Hour, "event-time window of blocks")
	lateness := fs.Duration("lateness", time.Minute, "how long past its end a window stays open")
	ahead := fs.Duration("max-event-time-ahead", time.Hour, "records with an event time further ahead of the clock go to the dead-letter topic")
	group := fs.String("group", "", "consumer group (default sig-ingest-<source>)")
	instance := fs.String("instance-id", "", "static group member id (restarts reclaim partitions at once)")
	maxBytes := fs.Int("max-record-bytes", record.DefaultMaxBytes, "larger records go to the dead-letter topic")
	compression := fs.String("segment-compression", block.DefaultCompression.Flag(), "Arrow IPC buffer compression of the blocks' segments: none, lz4 or zstd")
	gcInterval := fs.Duration("gc-interval", time.Minute, "collect superseded block versions no pin sees this often (negative: never)")
	gcGrace := fs.Duration("gc-grace", 10*time.Minute, "keep a superseded block version at least this long (negative: not at all)")
	newLogger := cli.LogFlag(fs)
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return err
	}
	if len(brokers) == 0 || *catDir == "" {
		return fmt.Errorf("%w: --kafka-brokers and --catalog are required", cli.ErrUsage)
	}
	schema, err := loadSchema(*source, *schemaPath)
	if err != nil {
		return err
	}
	comp, err := block.ParseCompression(*compression)
	if err != nil {
		return fmt.Errorf("%w: --segment-compression: %v", cli.ErrUsage, err)
	}
	compactDelay, err := testCompactDelay(logger)
	if err != nil {
		return err
	}
	store, err := s3.open(logger)
	if err != nil {
		return err
	}
	cat, err := catalog.Open(*catDir)
	if err != nil {
		return err
	}
	defer cat.Close()
	in, err := ingest.New(ingest.Config{Brokers: brokers, Schema: schema, Group: *group,
		InstanceID: *instance, Store: store, Catalog: cat, RowsPerBlock: *rows, BlockBytes: *blockBytes, SealAfter: *sealAfter,
		CompactBytes: *compactBytes, CompactQuiet: *compactQuiet, CompactEvery: *compactEvery, BeforeCompactCommit: compactDelay,
		Window: *window, Lateness: *lateness, MaxEventTimeAhead: *ahead, MaxRecordBytes: *maxBytes, Logger: logger,
		Compression: comp, GCInterval: *gcInterval, GCGrace: *gcGrace})
	if err != nil {
		return err
	}
	if compactDelay != nil {
		logger.Warn("SIG_TEST_COMPACT_DELAY is set: each compaction waits between writing its object and its catalog batch", "delay", os.Getenv("SIG_TEST_COMPACT_DELAY"))
	}
	err = in.Run(ctx)
	st := in.Stats()
	fmt.Fprintf(stdout, "records %d, rows %d, blocks %d (late %d), versions %d (late %d, update %d, delete %d), dead letters %d, skipped %d, compactions %d (of %d blocks)\n",
		st.Records, st.Rows, st.Blocks, st.LateBlocks, st.Versions, st.VersionsLate, st.VersionsUpdate, st.VersionsDelete,
		st.DeadLetters, st.Skipped, st.Compactions, st.CompactedBlocks)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// listCatalog reads the blocks of a catalog directory (of source, or of
// every source). A catalog only one process may have open: if a running sigd
// (or sigctl ingest) has it, the error says so and points at --sigd.
func listCatalog(dir, source string) ([]block.Meta, error) {
	c, err := catalog.Open(dir)
	var locked *pebbleutil.LockedError
	if errors.As(err, &locked) {
		holder := "another process"
		if locked.PID > 0 {
			holder = fmt.Sprintf("process %d", locked.PID)
			if name := processName(locked.PID); name != "" {
				holder = fmt.Sprintf("%s (pid %d)", name, locked.PID)
			}
		}
		return nil, fmt.Errorf("catalog %s is in use by %s: a running sigd holds its catalog; list it through sigd: sigctl warehouse list --sigd ADDR --token T", dir, holder)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sources := []string{source}
	if source == "" {
		if sources, err = c.Sources(); err != nil {
			return nil, err
		}
	}
	var out []block.Meta
	for _, s := range sources {
		blocks, err := c.Blocks(s)
		if err != nil {
			return nil, err
		}
		out = append(out, blocks...)
	}
	return out, nil
}

// processName is the command name of a process, or "" (Linux: /proc).
func processName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// listThroughSigd pages through the catalog of a running sigd (ListBlocks).
func listThroughSigd(s *session, source string) ([]block.Meta, error) {
	var out []block.Meta
	req := &sigv1.ListBlocksRequest{Source: source}
	for {
		resp, err := call(s, sigv1.SIGClient.ListBlocks, req)
		if err != nil {
			return nil, fmt.Errorf("sigd %s: %w", s.conn.Addr, err)
		}
		for _, b := range resp.GetBlocks() {
			m := block.Meta{Source: b.GetSource(), ID: b.GetBlockId(), Key: b.GetRawObject(), Rows: b.GetRows(),
				Size: b.GetBytes(), MinEventTime: b.GetEvents().GetStartMicros(), MaxEventTime: b.GetEvents().GetEndMicros() - 1,
				Late: b.GetLate(), Generation: b.GetGeneration(), Version: b.GetVersion(), Seq: b.GetSnapshot()}
			if b.GetKafkaTopic() != "" {
				m.Kafka = &block.KafkaRange{Topic: b.GetKafkaTopic(), Partition: b.GetKafkaPartition(),
					First: b.GetKafkaFirstOffset(), Last: b.GetKafkaLastOffset()}
			}
			out = append(out, m)
		}
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// warehouseList is `sigctl warehouse list`: a remote command that calls
// sigd only without --catalog.
var warehouseList = remote{name: "warehouse list", flags: func(fs *flag.FlagSet) func(*session, []string) error {
	catDir := fs.String("catalog", "", "read the block catalog directory (Pebble) of a stopped sigd or sigctl ingest; without it, ask sigd (--sigd)")
	source := fs.String("source", "", "only this source")
	return func(s *session, _ []string) error {
		var blocks []block.Meta
		var err error
		if *catDir != "" {
			blocks, err = listCatalog(*catDir, *source)
		} else {
			blocks, err = listThroughSigd(s, *source)
		}
		if err != nil {
			return err
		}
		tw := table(s.stdout, "SOURCE\tBLOCK\tVERSION\tROWS\tBYTES\tEVENT TIME\tKAFKA\tLATE\tGEN")
		for _, m := range blocks {
			kafka := "-"
			if m.Kafka != nil {
				kafka = fmt.Sprintf("%s[%d] %d-%d", m.Kafka.Topic, m.Kafka.Partition, m.Kafka.First, m.Kafka.Last)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s..%s\t%s\t%v\t%d\n", m.Source, m.ID, m.Ref().Version(), m.Rows, m.Size,
				time.UnixMicro(m.MinEventTime).UTC().Format(time.RFC3339), time.UnixMicro(m.MaxEventTime).UTC().Format(time.RFC3339),
				kafka, m.Late, m.Generation)
		}
		return tw.Flush()
	}
}}

func runWarehouse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: warehouse rebuild-catalog|list", cli.ErrUsage)
	}
	switch args[0] {
	case "rebuild-catalog":
		fs := commands.NewFlags("warehouse rebuild-catalog", stderr)
		catDir := fs.String("catalog", "", "block catalog directory (Pebble)")
		var s3 s3Flags
		s3.register(fs)
		if err := cli.ParseEnv(fs, args[1:]); err != nil {
			return err
		}
		if *catDir == "" {
			return fmt.Errorf("%w: --catalog is required", cli.ErrUsage)
		}
		store, err := s3.open(nil)
		if err != nil {
			return err
		}
		c, rep, err := catalog.Rebuild(ctx, store, *catDir)
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintf(stdout, "catalogued %d blocks and %d later versions into %s (generation %d)\n", rep.Blocks, rep.Versions, *catDir, rep.Generation)
		for _, k := range rep.Superseded {
			fmt.Fprintf(stdout, "superseded (left out): %s\n", k)
		}
		for _, k := range rep.Unreadable {
			fmt.Fprintf(stdout, "unreadable (left out): %s\n", k)
		}
		return nil
	case "list":
		return warehouseList.run(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("%w: unknown warehouse command %q (want rebuild-catalog or list)", cli.ErrUsage, args[0])
	}
}

// recordFormat is a --format flag (row or json) as a record content type.
func recordFormat(format string) (string, error) {
	switch format {
	case "row":
		return record.ContentTypeRow, nil
	case "json":
		return record.ContentTypeJSON, nil
	}
	return "", fmt.Errorf("%w: --format %q (want row or json)", cli.ErrUsage, format)
}

// producer is a Kafka client for brokers with topic created if missing
// (topics.Ensure, the one mechanism SIG creates topics with): what
// sigctl generate and sigctl produce write events through.
func producer(ctx context.Context, brokers []string, topic string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = topics.Ensure(tctx, cl, topics.Spec{Name: topic, Partitions: -1})
	cancel()
	if err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// testCompactDelay reads SIG_TEST_COMPACT_DELAY (test-only, see the
// command's doc): a Go duration each compaction waits between writing the
// compacted block's object and its catalog batch, so a reliability test
// can kill the process there. nil when unset.
func testCompactDelay(logger *slog.Logger) (func(context.Context, block.Meta), error) {
	v := os.Getenv("SIG_TEST_COMPACT_DELAY")
	if v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("SIG_TEST_COMPACT_DELAY=%q: want a non-negative duration", v)
	}
	return func(ctx context.Context, m block.Meta) {
		logger.Warn("compaction written, waiting before its catalog batch", "block", m.ID, "parts", len(m.Parts))
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}, nil
}
