package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/topics"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
)

func init() {
	register(&command{name: "gen", run: runGen,
		usage: "--kafka-brokers B [--topic T] | --out FILE.arrow; [--events N --seed S --start-time T]: generate Ads events"})
	register(&command{name: "ingest", run: runIngest,
		usage: "--kafka-brokers B --s3-endpoint E ... --catalog DIR: ingest raw.<source> into warehouse blocks"})
	register(&command{name: "warehouse", run: runWarehouse,
		usage: "rebuild-catalog|list [flags]: rebuild the block catalog from the bucket, or print it"})
}

func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if err := cli.ApplyEnv(fs); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return pos, nil
}

func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// s3Flags are the object-store flags of the warehouse commands: the
// shared ones (cli.ObjectStoreFlags), and --bucket, the name these commands
// gave --s3-bucket before every command shared it, kept so that scripts
// using it still work.
type s3Flags struct{ cfg *objstore.Config }

func (f *s3Flags) register(fs *flag.FlagSet) {
	f.cfg = cli.ObjectStoreFlags(fs, "S3 endpoint host:port (required)")
	fs.StringVar(&f.cfg.Bucket, "bucket", f.cfg.Bucket, "the same as --s3-bucket")
}

func (f *s3Flags) open(logger *slog.Logger) (*objstore.Store, error) {
	if f.cfg.Endpoint == "" {
		return nil, fmt.Errorf("%w: --s3-endpoint is required", errUsage)
	}
	c := *f.cfg
	c.Logger = logger
	return objstore.New(c)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q", errUsage, level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gen", stderr)
	brokers := fs.String("kafka-brokers", "", "comma-separated Kafka brokers to produce to")
	topic := fs.String("topic", ingest.TopicFor("ads"), "topic to produce to")
	out := fs.String("out", "", "write an Arrow IPC file instead of producing")
	events := fs.Int("events", 100_000, "number of events")
	seed := fs.Uint64("seed", 1, "random seed")
	start := fs.String("start-time", "2026-01-01T00:00:00Z", "event time of the first event (RFC 3339)")
	rate := fs.Float64("events-per-second", 100, "events per second of event time")
	late := fs.Float64("late-fraction", 0.001, "fraction of late events (negative: none)")
	firstID := fs.Int64("first-event-id", 1, "id of the first event")
	format := fs.String("format", "row", "record encoding: row (compact binary) or json")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*brokers == "") == (*out == "") {
		return fmt.Errorf("%w: give exactly one of --kafka-brokers and --out", errUsage)
	}
	t0, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return fmt.Errorf("%w: --start-time: %v", errUsage, err)
	}
	if *events < 0 {
		return fmt.Errorf("%w: --events must be >= 0", errUsage)
	}
	g := gen.New(gen.Config{Seed: *seed, Start: t0, EventsPerSecond: *rate, LateFraction: *late, FirstEventID: *firstID})
	if *out != "" {
		if err := g.WriteFile(*out, *events); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d events to %s\n", *events, *out)
		return nil
	}
	ct := record.ContentTypeRow
	switch *format {
	case "row":
	case "json":
		ct = record.ContentTypeJSON
	default:
		return fmt.Errorf("%w: --format %q (want row or json)", errUsage, *format)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitBrokers(*brokers)...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = topics.Ensure(tctx, cl, topics.Spec{Name: *topic, Partitions: -1})
	cancel()
	if err != nil {
		return err
	}
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
		return nil, fmt.Errorf("%w: source %q has no built-in schema; give --schema FILE.json", errUsage, source)
	}
	return s, nil
}

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ingest", stderr)
	var s3 s3Flags
	s3.register(fs)
	brokers := fs.String("kafka-brokers", "", "comma-separated Kafka brokers (env SIG_KAFKA_BROKERS)")
	source := fs.String("source", "ads", "event source; consumes raw.<source>")
	schemaPath := fs.String("schema", "", "JSON schema file of the source (default: the built-in Ads schema)")
	catDir := fs.String("catalog", "", "block catalog directory (Pebble)")
	rows := fs.Int("rows-per-block", 100_000, "seal a block at this many rows")
	sealAfter := fs.Duration("seal-after", 30*time.Second, "seal a block this long after its first row")
	window := fs.Duration("window", time.Hour, "event-time window of blocks")
	lateness := fs.Duration("lateness", time.Minute, "how long past its end a window stays open")
	ahead := fs.Duration("max-event-time-ahead", time.Hour, "records with an event time further ahead of the clock go to the dead-letter topic")
	group := fs.String("group", "", "consumer group (default sig-ingest-<source>)")
	instance := fs.String("instance-id", "", "static group member id (restarts reclaim partitions at once)")
	maxBytes := fs.Int("max-record-bytes", record.DefaultMaxBytes, "larger records go to the dead-letter topic")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	if *brokers == "" || *catDir == "" {
		return fmt.Errorf("%w: --kafka-brokers and --catalog are required", errUsage)
	}
	schema, err := loadSchema(*source, *schemaPath)
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
	in, err := ingest.New(ingest.Config{Brokers: splitBrokers(*brokers), Schema: schema, Group: *group,
		InstanceID: *instance, Store: store, Catalog: cat, RowsPerBlock: *rows, SealAfter: *sealAfter,
		Window: *window, Lateness: *lateness, MaxEventTimeAhead: *ahead, MaxRecordBytes: *maxBytes, Logger: logger})
	if err != nil {
		return err
	}
	err = in.Run(ctx)
	st := in.Stats()
	fmt.Fprintf(stdout, "records %d, rows %d, blocks %d (late %d), dead letters %d, skipped %d\n",
		st.Records, st.Rows, st.Blocks, st.LateBlocks, st.DeadLetters, st.Skipped)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func runWarehouse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: warehouse rebuild-catalog|list", errUsage)
	}
	fs := newFlags("warehouse "+args[0], stderr)
	catDir := fs.String("catalog", "", "block catalog directory (Pebble)")
	switch args[0] {
	case "rebuild-catalog":
		var s3 s3Flags
		s3.register(fs)
		if _, err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if *catDir == "" {
			return fmt.Errorf("%w: --catalog is required", errUsage)
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
		fmt.Fprintf(stdout, "catalogued %d blocks into %s (generation %d)\n", rep.Blocks, *catDir, rep.Generation)
		for _, k := range rep.Superseded {
			fmt.Fprintf(stdout, "superseded (left out): %s\n", k)
		}
		for _, k := range rep.Unreadable {
			fmt.Fprintf(stdout, "unreadable (left out): %s\n", k)
		}
		return nil
	case "list":
		source := fs.String("source", "", "only this source")
		if _, err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if *catDir == "" {
			return fmt.Errorf("%w: --catalog is required", errUsage)
		}
		c, err := catalog.Open(*catDir)
		if err != nil {
			return err
		}
		defer c.Close()
		sources := []string{*source}
		if *source == "" {
			if sources, err = c.Sources(); err != nil {
				return err
			}
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE\tBLOCK\tROWS\tBYTES\tEVENT TIME\tKAFKA\tLATE\tGEN")
		for _, s := range sources {
			blocks, err := c.Blocks(s)
			if err != nil {
				return err
			}
			for _, m := range blocks {
				kafka := "-"
				if m.Kafka != nil {
					kafka = fmt.Sprintf("%s[%d] %d-%d", m.Kafka.Topic, m.Kafka.Partition, m.Kafka.First, m.Kafka.Last)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s..%s\t%s\t%v\t%d\n", m.Source, m.ID, m.Rows, m.Size,
					time.UnixMicro(m.MinEventTime).UTC().Format(time.RFC3339), time.UnixMicro(m.MaxEventTime).UTC().Format(time.RFC3339),
					kafka, m.Late, m.Generation)
			}
		}
		return tw.Flush()
	default:
		return fmt.Errorf("%w: unknown warehouse command %q (want rebuild-catalog or list)", errUsage, args[0])
	}
}
