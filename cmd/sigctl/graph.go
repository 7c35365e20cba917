package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"

	"github.com/sigdata/sig/internal/arrowfile"
	"github.com/sigdata/sig/matching/canon"
	"github.com/sigdata/sig/transform"
)

func init() {
	register(&command{name: "canon", usage: "FILE [--json] [--schema F]: component key, nodes and raw columns of every model input", run: runCanon})
	register(&command{name: "fmt", usage: "FILE [--schema F]: the canonical DSL of every model input", run: runFmt})
	register(&command{name: "run", usage: "FILE --raw IN.arrow --out OUT.arrow [--schema F]: local input generation over a raw Arrow file", run: runRun})
}

// schemaFlag adds --schema and returns a loader for it.
func schemaFlag(fs *flag.FlagSet) func() (*transform.Schema, error) {
	path := fs.String("schema", "", "raw source schema as JSON (default: the built-in Ads schema)")
	return func() (*transform.Schema, error) {
		if *path == "" {
			return transform.AdsSchema(), nil
		}
		return transform.LoadSchema(*path)
	}
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
		return "", fmt.Errorf("%w: want exactly one graph FILE, got %d arguments", errUsage, len(pos))
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

func runCanon(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("canon", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	schema := schemaFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	s, err := schema()
	if err != nil {
		return err
	}
	c, err := loadCanonical(path, s)
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
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INPUT\tKEY\tNODES\tCOLUMNS")
	for _, comp := range c.Components {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", comp.Input, comp.Key, len(comp.Nodes), strings.Join(comp.Columns, ","))
	}
	return tw.Flush()
}

func runFmt(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fmt", stderr)
	schema := schemaFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	s, err := schema()
	if err != nil {
		return err
	}
	c, err := loadCanonical(path, s)
	if err != nil {
		return err
	}
	for i := range c.Components {
		comp := &c.Components[i]
		fmt.Fprintf(stdout, "# %s: key %s, %d nodes\n%s\n\n", comp.Input, comp.Key, len(comp.Nodes), c.DSL(comp, comp.Input))
	}
	return nil
}

func runRun(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	schema := schemaFlag(fs)
	rawPath := fs.String("raw", "", "raw events, an Arrow IPC file")
	outPath := fs.String("out", "", "output Arrow IPC file: event_id and one column per model input")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	if *rawPath == "" || *outPath == "" {
		return fmt.Errorf("%w: --raw and --out are required", errUsage)
	}
	s, err := schema()
	if err != nil {
		return err
	}
	c, err := loadCanonical(path, s)
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

// RunLocal is local input generation (LIG) over a raw Arrow IPC file: it
// runs every component of c over every record batch and writes event_id
// plus one column per model input, batch for batch.
//
// The raw file comes from outside SIG: it is read with arrowfile, which
// makes a malformed file an error naming it (not a panic, not an
// out-of-memory crash), and each batch is conformed to the schema
// (transform.Conform) before anything reads it, so that a column of a
// foreign type is converted or refused with the column named.
func RunLocal(c *canon.Canonical, s *transform.Schema, rawPath, outPath string) (int64, error) {
	g := c.Graph()
	if _, err := transform.Check(g, s, transform.Default(), transform.Limits{}); err != nil {
		return 0, err
	}
	fields := []arrow.Field{{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64}}
	nodes := make([]int, len(g.Inputs))
	for i, in := range g.Inputs {
		nodes[i] = in.Node
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
	need := rawColumns(g)
	var rows int64
	err = arrowfile.ReadFile(rawPath, func(i int, raw arrow.Record) error {
		n, err := runBatch(raw, g, s, need, nodes, outSchema, w)
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

// rawColumns is event_id and every raw column g reads, each once.
func rawColumns(g *transform.Graph) []string {
	names := []string{transform.ColEventID}
	for _, n := range g.Nodes {
		if n.Op != "col" {
			continue
		}
		if name, _ := n.Param("name"); !slices.Contains(names, name.Str) {
			names = append(names, name.Str)
		}
	}
	return names
}

// runBatch runs a batch of raw events through g and writes event_id and
// the inputs' columns to w.
func runBatch(raw arrow.Record, g *transform.Graph, s *transform.Schema, need []string, nodes []int,
	outSchema *arrow.Schema, w *ipc.FileWriter) (int64, error) {
	rec, err := transform.Conform(s, raw, need)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	if err := transform.CheckRecord(g, s, rec); err != nil {
		return 0, err
	}
	cols, err := transform.Run(g, transform.Default(), rec, nodes...)
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
