package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/arrowfile"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

func init() {
	commands.Register(cli.Command{Name: "produce", Run: runProduce,
		Usage: "FILE.arrow --kafka-brokers B [--source S --schema F] [--topic T] [--format row|json]: send the events of a raw Arrow file to raw.<source> for ingestion"})
}

// runProduce is ingestion's edge for Arrow files: events another program
// wrote as an Arrow IPC file, in any encoding transform.Conform takes
// (dictionary-encoded strings as Arrow JS writes them, large_utf8,
// string_view, list views), become one record per event on the source's
// topic, the same records `sigctl gen` produces, so that ingestion stores
// the same blocks (and workers the same memo objects) as for plain utf8.
func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("produce", stderr)
	var brokers cli.List
	fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka brokers to produce to")
	source := fs.String("source", "ads", "event source")
	schemaPath := fs.String("schema", "", "JSON schema file of the source (default: the built-in Ads schema)")
	topic := fs.String("topic", "", "topic to produce to (default raw.<source>)")
	format := fs.String("format", "row", "record encoding: row (compact binary) or json")
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	if len(brokers) == 0 {
		return fmt.Errorf("%w: --kafka-brokers is required", cli.ErrUsage)
	}
	s, err := loadSchema(*source, *schemaPath)
	if err != nil {
		return err
	}
	if *topic == "" {
		*topic = ingest.TopicFor(s.Source)
	}
	ct, err := recordFormat(*format)
	if err != nil {
		return err
	}
	enc, err := record.NewEncoder(s, ct)
	if err != nil {
		return err
	}
	cl, err := producer(ctx, brokers, *topic)
	if err != nil {
		return err
	}
	defer cl.Close()
	names := make([]string, len(s.Fields))
	idCol := 0
	for i, f := range s.Fields {
		names[i] = f.Name
		if f.Name == transform.ColEventID {
			idCol = i
		}
	}
	hdr := []kgo.RecordHeader{{Key: record.HeaderContentType, Value: []byte(ct)}}
	errc := make(chan error, 1)
	failed := func() error {
		select {
		case err := <-errc:
			return fmt.Errorf("produce to %s: %w", *topic, err)
		default:
			return nil
		}
	}
	var n int64
	err = arrowfile.ReadFile(path, func(b int, raw arrow.Record) error {
		rec, err := transform.Conform(s, raw, names)
		if err != nil {
			return fmt.Errorf("%s: record batch %d: %w", path, b, err)
		}
		defer rec.Release()
		ids := rec.Column(idCol).(*array.Int64)
		for i := range int(rec.NumRows()) {
			v, err := enc.Row(rec, i)
			if err != nil {
				return fmt.Errorf("%s: record batch %d: %w", path, b, err)
			}
			r := &kgo.Record{Topic: *topic, Key: strconv.AppendInt(nil, ids.Value(i), 10), Value: v, Headers: hdr}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			})
			n++
		}
		return failed()
	})
	if err != nil {
		return err
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err := failed(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "produced %d events of %s to %s\n", n, path, *topic)
	return nil
}
