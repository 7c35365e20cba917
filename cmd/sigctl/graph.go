package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/arrowfile"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/transform"
)

func init() {
	registerGraph("canon", "FILE [--json] [--schema F]: component key, nodes and raw columns of every model input", canonFlags)
	registerGraph("fmt", "FILE [--schema F]: the canonical DSL of every model input", fmtFlags)
	registerGraph("run", "FILE --raw IN.arrow --out OUT.arrow [--schema F]: local input generation over a raw Arrow file", runFlags)
}

// graphRun is the work of a graph command: load reads the graph FILE
// under --schema and canonicalizes it.
type graphRun func(stdout io.Writer, load func() (*canon.Canonical, *transform.Schema, error)) error

// registerGraph registers a command over one graph FILE (canon, fmt, run):
// flags adds its own flags (besides --schema) and returns its work. The
// command runs locally and reads no SIG_* variables.
func registerGraph(name, usage string, flags func(fs *flag.FlagSet) graphRun) {
	commands.Register(cli.Command{Name: name, Usage: usage, Run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		fs := commands.NewFlags(name, stderr)
		schemaPath := fs.String("schema", "", "raw source schema as JSON (default: the built-in Ads schema)")
		run := flags(fs)
		pos, err := cli.ParseInterspersed(fs, args)
		if err != nil {
			return err
		}
		path, err := oneFile(pos)
		if err != nil {
			return err
		}
		return run(stdout, func() (*canon.Canonical, *transform.Schema, error) {
			s := transform.AdsSchema()
			if *schemaPath != "" {
				if s, err = transform.LoadSchema(*schemaPath); err != nil {
					return nil, nil, err
				}
			}
			c, err := loadCanonical(path, s)
			return c, s, err
		})
	}})
}

// readDSL reads a graph file, refusing files over the size limit before
// reading them whole.
func readDSL(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lim := transform.DefaultLimits().MaxSourceBytes
	b, err := io.ReadAll(io.LimitReader(f, int64(lim)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > lim {
		return nil, fmt.Errorf("%s: file is larger than the limit of %d bytes", path, lim)
	}
	return b, nil
}

// loadCanonical parses, checks and canonicalizes a graph file.
func loadCanonical(path string, s *transform.Schema) (*canon.Canonical, error) {
	src, err := readDSL(path)
	if err != nil {
		return nil, err
	}
	g, _, err := transform.ParseAndCheck(src, path, s, transform.Default(), transform.Limits{})
	if err != nil {
		return nil, err
	}
	return canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
}

func oneFile(pos []string) (string, error) {
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: want exactly one graph FILE, got %d arguments", cli.ErrUsage, len(pos))
	}
	return pos[0], nil
}

// CanonOutput is the JSON printed by `sigctl canon --json`.
type CanonOutput struct {
	Inputs map[string]CanonInput `json:"inputs"`
}

// CanonInput describes one model input's component.
type CanonInput struct {
	Key     string   `json:"key"`
	Nodes   int      `json:"nodes"`
	Columns []string `json:"columns"`
}

func canonFlags(fs *flag.FlagSet) graphRun {
	asJSON := fs.Bool("json", false, "print one JSON object")
	return func(stdout io.Writer, load func() (*canon.Canonical, *transform.Schema, error)) error {
		c, _, err := load()
		if err != nil {
			return err
		}
		if *asJSON {
			out := CanonOutput{Inputs: map[string]CanonInput{}}
			for _, comp := range c.Components {
				out.Inputs[comp.Input] = CanonInput{Key: comp.Key.String(), Nodes: len(comp.Nodes), Columns: comp.Columns}
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		tw := table(stdout, "INPUT\tKEY\tNODES\tCOLUMNS")
		for _, comp := range c.Components {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", comp.Input, comp.Key, len(comp.Nodes), strings.Join(comp.Columns, ","))
		}
		return tw.Flush()
	}
}

func fmtFlags(*flag.FlagSet) graphRun {
	return func(stdout io.Writer, load func() (*canon.Canonical, *transform.Schema, error)) error {
		c, _, err := load()
		if err != nil {
			return err
		}
		for i := range c.Components {
			comp := &c.Components[i]
			fmt.Fprintf(stdout, "# %s: key %s, %d nodes\n%s\n\n", comp.Input, comp.Key, len(comp.Nodes), c.DSL(comp, comp.Input))
		}
		return nil
	}
}

func runFlags(fs *flag.FlagSet) graphRun {
	rawPath := fs.String("raw", "", "raw events, an Arrow IPC file")
	outPath := fs.String("out", "", "output Arrow IPC file: event_id and one column per model input")
	return func(stdout io.Writer, load func() (*canon.Canonical, *transform.Schema, error)) error {
		if *rawPath == "" || *outPath == "" {
			return fmt.Errorf("%w: --raw and --out are required", cli.ErrUsage)
		}
		c, s, err := load()
		if err != nil {
			return err
		}
		n, err := RunLocal(c, s, *rawPath, *outPath)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d rows, %d inputs to %s\n", n, len(c.Components), *outPath)
		return nil
	}
}

// RunLocal is local input generation (LIG) over a raw Arrow IPC file: it
// runs every component of c over every record batch and writes event_id
// plus one column per model input, batch for batch.
//
// The raw file comes from outside SIG: it is read with arrowfile, which
// makes a malformed file an error naming it (not a panic, not an
// out-of-memory crash), and each batch is computed by the graph's
// transform.Program, as workers and readers compute a block, which
// conforms it to the schema before anything reads it, so that a column of
// a foreign type is converted or refused with the column named.
//
// Only the program's columns are read (arrowfile.ReadColumns: the file
// memory-mapped, those columns' buffers used where they lie): reading
// every column through Arrow's copying reader was most of the process for
// a cheap graph (issue 27: 75% of bucketize over 1M rows). A batch's
// arrays, and a model input that passes a raw column through, point into
// the mapping, so each batch is written out before its call returns.
func RunLocal(c *canon.Canonical, s *transform.Schema, rawPath, outPath string) (int64, error) {
	prog, err := transform.Compile(c.Graph(), s, transform.Default(), transform.Limits{})
	if err != nil {
		return 0, err
	}
	fields := []arrow.Field{{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64}}
	for i, in := range prog.Graph().Inputs {
		fields = append(fields, arrow.Field{Name: in.Name, Type: c.Components[i].Type.ArrowType(), Nullable: true})
	}
	outSchema := arrow.NewSchema(fields, nil)
	tmp := outPath + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp)
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(outSchema))
	if err != nil {
		out.Close()
		return 0, err
	}
	var rows int64
	err = arrowfile.ReadColumns(rawPath, prog.Columns(), func(i int, raw arrow.Record) error {
		n, err := runBatch(raw, prog, outSchema, w)
		if err != nil {
			return fmt.Errorf("%s: record batch %d: %w", rawPath, i, err)
		}
		rows += n
		return nil
	})
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		out.Close()
		return 0, err
	}
	if err := out.Close(); err != nil {
		return 0, err
	}
	return rows, os.Rename(tmp, outPath)
}

// runBatch runs a batch of raw events through prog and writes event_id
// and the inputs' columns to w.
func runBatch(raw arrow.Record, prog *transform.Program, outSchema *arrow.Schema, w *ipc.FileWriter) (int64, error) {
	// Conformed here rather than in Run: the batch's event_id is written
	// out, in the schema's type.
	rec, err := prog.Conform(raw)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	cols, err := prog.Run(rec, nil)
	if err != nil {
		return 0, err
	}
	all := append([]arrow.Array{rec.Column(0)}, cols...)
	outRec := array.NewRecord(outSchema, all, rec.NumRows())
	err = w.Write(outRec)
	outRec.Release()
	for _, col := range cols {
		col.Release()
	}
	return rec.NumRows(), err
}
