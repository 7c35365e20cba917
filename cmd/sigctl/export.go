package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/sigdata/sig/internal/cli"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

func init() {
	registerRemote(remote{name: "export", flags: exportFlags,
		usage: "(--client C --pipeline P [--range FROM:TO] [--mode M] [--readers A,B] | --object KEY [--column NAME]) --out FILE [--format parquet|arrow] [--s3-endpoint …]: " +
			"write a pipeline's inputs over an event range, or one memo or raw block object (a pack whole or one member), as a Parquet or Arrow IPC file"})
}

// exportFlags: `sigctl export` writes SIG data in standard formats, for
// DuckDB, pandas, Polars or Spark to read directly:
//
//   - a pipeline's inputs over an event range, exactly the rows whose
//     event_time lies in [FROM, TO) (the readers trim the blocks the range
//     cuts, WorkUnit.event_range; issue 29): the read solution from sigd
//     (GetReadSolution, the caller's token), its work units read as a
//     trainer reads them (event_id, the labels, one column per model
//     input; reader.UnitsFromSolution), through the readers of --readers
//     (reader.Client) or, without it, a reader in this process over the
//     bucket (--s3-*), every unit's batches in event order into one file;
//   - one block object (--object: a pack, memo/packs/<source>/<block>/<id>.arrow,
//     a memo object of one component as written before packs,
//     memo/<key>/<block>.arrow, or a raw block), its table as the object
//     holds it: a pack's event_id and every member's column, named by its
//     component key (issue 28); with --column, event_id and that column
//     only (a pack's member: a memo entry's column, the component key in
//     hex), read by its offset in the footer.
//
// --format parquet writes Parquet (Arrow Go's pqarrow, Snappy-compressed,
// row groups of up to a million rows); arrow writes an Arrow IPC file
// ("Feather v2"), uncompressed, readable by any Arrow implementation. The
// file is written under a temporary name and renamed when complete.
func exportFlags(fs *flag.FlagSet) func(*session, []string) error {
	client := fs.String("client", "", "client of the pipeline")
	pipeline := fs.String("pipeline", "", "pipeline to export")
	rng := fs.String("range", "", "event range FROM:TO (default: the pipeline's last submit)")
	mode := fs.String("mode", "memo", "how inputs are read: memo (SIG), local (LIG: computed from raw) or ready-else-local")
	batchRows := fs.Int("batch-rows", 0, "rows per batch read (default: the reader's)")
	var readers cli.List
	fs.Var(&readers, "readers", "comma-separated reader addresses (default: read the bucket in this process)")
	object := fs.String("object", "", "export this block object (a pack, memo or raw block key) instead of a pipeline")
	column := fs.String("column", "", "with --object: export event_id and this column only (a pack's member: the component key in hex)")
	out := fs.String("out", "", "output file (required)")
	format := fs.String("format", "", "parquet or arrow (default: from --out's extension, .parquet or .arrow)")
	var s3 s3Flags
	s3.register(fs)
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		if *out == "" {
			return fmt.Errorf("%w: --out is required", cli.ErrUsage)
		}
		f := *format
		if f == "" {
			switch strings.ToLower(filepath.Ext(*out)) {
			case ".parquet":
				f = "parquet"
			case ".arrow", ".feather":
				f = "arrow"
			default:
				return fmt.Errorf("%w: give --format parquet or arrow (--out %q has neither extension)", cli.ErrUsage, *out)
			}
		}
		if f != "parquet" && f != "arrow" {
			return fmt.Errorf("%w: --format %q (want parquet or arrow)", cli.ErrUsage, f)
		}
		if (*object == "") == (*pipeline == "") {
			return fmt.Errorf("%w: give exactly one of --pipeline and --object", cli.ErrUsage)
		}
		if *column != "" && *object == "" {
			return fmt.Errorf("%w: --column needs --object", cli.ErrUsage)
		}
		if _, err := unitMode(*mode); err != nil { // a usage error before any I/O
			return err
		}
		if *rng != "" {
			if _, err := parseRange(*rng); err != nil {
				return err
			}
		}
		w := &exportWriter{path: *out, format: f}
		defer w.abort()
		var rows int64
		if *object != "" {
			store, err := s3.open(slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			rec, err := readObject(s.ctx, store, *object, *column)
			if err != nil {
				return err
			}
			defer rec.Release()
			if err := w.write(rec); err != nil {
				return err
			}
			rows = rec.NumRows()
		} else {
			units, err := pipelineUnits(s, *client, *pipeline, *rng, *mode, *batchRows)
			if err != nil {
				return err
			}
			read, closeRead, err := unitReader(s, readers, &s3)
			if err != nil {
				return err
			}
			defer closeRead()
			for _, u := range units {
				err := read(s.ctx, u, func(rec arrow.Record) error {
					rows += rec.NumRows()
					return w.write(rec)
				})
				if err != nil {
					return fmt.Errorf("unit %s: %w", u.GetUnitId(), err)
				}
			}
			if w.schema == nil {
				return fmt.Errorf("pipeline %s/%s has no blocks in the range: nothing to export", *client, *pipeline)
			}
		}
		if err := w.close(); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "wrote %d rows to %s (%s)\n", rows, *out, f)
		return nil
	}
}

// unitReader reads units through the readers at addrs (with the session's
// token) or, with none, through a reader served in this process over the
// bucket. fn sees each batch in order; a record is valid only during fn.
func unitReader(s *session, addrs []string, s3 *s3Flags) (read func(context.Context, *readerv1.WorkUnit, func(arrow.Record) error) error, closeFn func(), err error) {
	if len(addrs) > 0 {
		c, err := readerClient(s, addrs)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, u *readerv1.WorkUnit, fn func(arrow.Record) error) error {
			for rec, err := range c.Read(ctx, u) {
				if err != nil {
					return err
				}
				if err := fn(rec); err != nil {
					return err
				}
			}
			return nil
		}, func() { c.Close() }, nil
	}
	store, err := s3.open(slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, fmt.Errorf("%w (or give --readers)", err)
	}
	srv, err := reader.NewServer(reader.Config{Store: store})
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, u *readerv1.WorkUnit, fn func(arrow.Record) error) error {
		err := srv.Serve(ctx, &readerv1.ReadRequest{Unit: u}, func(resp *readerv1.ReadResponse) error {
			if resp.GetSummary() != nil {
				return nil
			}
			// The bytes go back to the reader's pool when send returns, and
			// fn has written the batch (both writers copy) by then.
			rd, err := ipc.NewReader(bytes.NewReader(resp.GetArrowIpc()))
			if err != nil {
				return err
			}
			defer rd.Release()
			for rd.Next() {
				if err := fn(rd.Record()); err != nil {
					return err
				}
			}
			return rd.Err()
		})
		return err
	}, func() {}, nil
}

// exportWriter writes records of one schema to a Parquet or Arrow IPC file,
// created at the first record under a temporary name.
type exportWriter struct {
	path, format string
	schema       *arrow.Schema
	f            *os.File
	pq           *pqarrow.FileWriter
	ipc          *ipc.FileWriter
}

func (w *exportWriter) write(rec arrow.Record) error {
	if w.schema == nil {
		f, err := os.Create(w.path + ".tmp")
		if err != nil {
			return err
		}
		w.f, w.schema = f, rec.Schema()
		if w.format == "parquet" {
			props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
				parquet.WithMaxRowGroupLength(1<<20), parquet.WithCreatedBy("sig (sigctl export)"))
			w.pq, err = pqarrow.NewFileWriter(w.schema, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		} else {
			w.ipc, err = ipc.NewFileWriter(f, ipc.WithSchema(w.schema))
		}
		if err != nil {
			return err
		}
	}
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("a batch of schema %s after batches of %s", rec.Schema(), w.schema)
	}
	if w.pq != nil {
		return w.pq.WriteBuffered(rec)
	}
	return w.ipc.Write(rec)
}

func (w *exportWriter) close() error {
	if w.f == nil {
		return nil
	}
	var err error
	if w.pq != nil {
		err = w.pq.Close()
	} else {
		err = w.ipc.Close()
	}
	// pqarrow closes the file it wrote to; Arrow's IPC writer does not.
	if cerr := w.f.Close(); !errors.Is(cerr, os.ErrClosed) {
		err = errors.Join(err, cerr)
	}
	w.f = nil
	if err != nil {
		os.Remove(w.path + ".tmp")
		return err
	}
	return os.Rename(w.path+".tmp", w.path)
}

// abort removes the temporary file of an export that failed.
func (w *exportWriter) abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.path + ".tmp")
	}
}

// readObject reads a block object whole (block.ReadBlock: the object's
// checksum and every segment's), or, with column, its event_id and that
// column (block.ReadColumns: their segments' checksums), naming the
// object's columns when it has no such one.
func readObject(ctx context.Context, store *objstore.Store, key, column string) (arrow.Record, error) {
	if column == "" {
		_, rec, err := block.ReadBlock(ctx, store, key)
		return rec, err
	}
	meta, err := block.ReadFooter(ctx, store, key)
	if err != nil {
		return nil, err
	}
	if _, ok := meta.Column(column); !ok || column == transform.ColEventID {
		names := make([]string, len(meta.Columns))
		for i, c := range meta.Columns {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("%w: --column %.80q: %s has columns %q", cli.ErrUsage, column, key, names)
	}
	return block.ReadColumns(ctx, store, meta, []string{column})
}
