package sigdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// LIGOutput is what `sigctl run` produced for one raw block: event_id and
// one column per model input, by input name.
type LIGOutput struct {
	EventID arrow.Array
	Inputs  map[string]arrow.Array
}

// LIG runs local input generation with the real CLI (`sigctl run`, built
// from cmd/sigctl) over one raw block read back from the warehouse: the
// block is written as an Arrow IPC file, the graph as a DSL file.
func LIG(tb testing.TB, store *objstore.Store, raw block.Meta, dsl string) *LIGOutput {
	tb.Helper()
	sigctl := BuildCommand(tb, "cmd/sigctl")
	dir := tb.TempDir()
	_, rec, err := block.ReadBlock(context.Background(), store, raw.Key)
	if err != nil {
		tb.Fatal(err)
	}
	defer rec.Release()
	in := filepath.Join(dir, "raw.arrow")
	f, err := os.Create(in)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	graph := filepath.Join(dir, "graph.sig")
	if err := os.WriteFile(graph, []byte(dsl), 0o644); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, "lig.arrow")
	cmd := exec.Command(sigctl, "run", graph, "--raw", in, "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("sigctl run: %v\n%s", err, b)
	}
	of, err := os.Open(out)
	if err != nil {
		tb.Fatal(err)
	}
	defer of.Close()
	r, err := ipc.NewFileReader(of, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	// sigctl run writes one output batch per input batch; the raw file has
	// one. Concatenate anyway, so a change there does not break this.
	cols := make([][]arrow.Array, r.Schema().NumFields())
	for i := 0; i < r.NumRecords(); i++ {
		b, err := r.Record(i)
		if err != nil {
			tb.Fatal(err)
		}
		for j := range cols {
			b.Column(j).Retain()
			cols[j] = append(cols[j], b.Column(j))
		}
	}
	res := &LIGOutput{Inputs: map[string]arrow.Array{}}
	for j, fld := range r.Schema().Fields() {
		a, err := array.Concatenate(cols[j], memory.DefaultAllocator)
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range cols[j] {
			c.Release()
		}
		if fld.Name == transform.ColEventID {
			res.EventID = a
		} else {
			res.Inputs[fld.Name] = a
		}
	}
	return res
}

// ColumnBytes serializes one column as an Arrow IPC stream (schema and one
// record batch): two columns are equal byte for byte when these are.
func ColumnBytes(a arrow.Array) ([]byte, error) {
	sch := arrow.NewSchema([]arrow.Field{{Name: "c", Type: a.DataType(), Nullable: true}}, nil)
	rec := array.NewRecord(sch, []arrow.Array{a}, int64(a.Len()))
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sch))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SameColumn reports how two columns differ ("" if they are the same
// array and the same bytes).
func SameColumn(got, want arrow.Array) string {
	if !arrow.TypeEqual(got.DataType(), want.DataType()) {
		return fmt.Sprintf("type %s, want %s", got.DataType(), want.DataType())
	}
	if got.Len() != want.Len() {
		return fmt.Sprintf("%d rows, want %d", got.Len(), want.Len())
	}
	if !array.Equal(got, want) {
		for i := 0; i < got.Len(); i++ {
			if !array.SliceEqual(got, int64(i), int64(i+1), want, int64(i), int64(i+1)) {
				return fmt.Sprintf("row %d differs: %s, want %s", i, valueString(got, i), valueString(want, i))
			}
		}
		return "arrays differ"
	}
	gb, err1 := ColumnBytes(got)
	wb, err2 := ColumnBytes(want)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("serialize: %v %v", err1, err2)
	}
	if !bytes.Equal(gb, wb) {
		return fmt.Sprintf("equal values but different Arrow IPC bytes (%d and %d bytes)", len(gb), len(wb))
	}
	return ""
}

func valueString(a arrow.Array, i int) string {
	s := array.NewSlice(a, int64(i), int64(i+1))
	defer s.Release()
	return fmt.Sprint(s)
}

// CheckMemo compares a memo object's column with LIG's column for the
// same model input and block, byte for byte (value and event_id); "" if
// equal. column is the input's column in a pack (issue 28), "" for an
// object of one component (its value).
func CheckMemo(ctx context.Context, store *objstore.Store, memoKey, column string, lig *LIGOutput, input string) (string, error) {
	want, ok := lig.Inputs[input]
	if !ok {
		return "", fmt.Errorf("LIG has no input %q", input)
	}
	var rec arrow.Record
	name := column
	if column == "" {
		_, r, err := block.ReadBlock(ctx, store, memoKey)
		if err != nil {
			return "", err
		}
		rec, name = r, block.MemoColumn
		if rec.NumCols() != 2 {
			defer rec.Release()
			return fmt.Sprintf("memo object %s has columns %v, want %s and %s", memoKey, rec.Schema(), transform.ColEventID, block.MemoColumn), nil
		}
	} else {
		meta, err := block.ReadFooter(ctx, store, memoKey)
		if err != nil {
			return "", err
		}
		if _, ok := meta.Column(column); !meta.Pack || !ok {
			return fmt.Sprintf("memo object %s (pack %t) has no column %s", memoKey, meta.Pack, column), nil
		}
		if rec, err = block.ReadColumns(ctx, store, meta, []string{column}); err != nil {
			return "", err
		}
	}
	defer rec.Release()
	vi := rec.Schema().FieldIndices(name)
	ei := rec.Schema().FieldIndices(transform.ColEventID)
	if len(vi) != 1 || len(ei) != 1 {
		return fmt.Sprintf("memo object %s has columns %v, want %s and %s", memoKey, rec.Schema(), transform.ColEventID, name), nil
	}
	if d := SameColumn(rec.Column(ei[0]), lig.EventID); d != "" {
		return "event_id: " + d, nil
	}
	if d := SameColumn(rec.Column(vi[0]), want); d != "" {
		return name + ": " + d, nil
	}
	return "", nil
}

// CheckSolution compares every memo object of a complete read solution
// with LIG over the same raw blocks (graph dsl is the pipeline's graph, so
// its input names are the solution's); ligs caches LIG outputs by block id.
func CheckSolution(tb testing.TB, store *objstore.Store, blocks []block.Meta, sol *sigv1.ReadSolution, dsl string, ligs map[string]*LIGOutput) {
	tb.Helper()
	byID := map[string]block.Meta{}
	for _, b := range blocks {
		byID[b.ID] = b
	}
	checked := 0
	// The raw blocks carry the raw objects and event ranges, once each; an
	// input's blocks do not repeat them (sig.proto, BlockRead).
	for _, rb := range sol.RawBlocks {
		if raw, ok := byID[rb.BlockId]; !ok || rb.RawObject != raw.Key || rb.Events == nil {
			tb.Errorf("%s/%s: raw block %s: object %q, events %v; want %q and a range", sol.Client, sol.Pipeline, rb.BlockId, rb.RawObject, rb.Events, raw.Key)
		}
	}
	for _, in := range sol.Inputs {
		for _, b := range in.Blocks {
			if b.RawObject != "" || b.Events != nil {
				tb.Errorf("%s/%s: input %s block %s repeats the raw block's object or events", sol.Client, sol.Pipeline, in.Input, b.BlockId)
			}
			if b.State != sigv1.BlockState_BLOCK_STATE_READY {
				tb.Errorf("%s/%s: input %s block %s is %s", sol.Client, sol.Pipeline, in.Input, b.BlockId, b.State)
				continue
			}
			raw, ok := byID[b.BlockId]
			if !ok {
				tb.Fatalf("solution names block %s, not in the warehouse", b.BlockId)
			}
			lig := ligs[b.BlockId]
			if lig == nil {
				lig = LIG(tb, store, raw, dsl)
				ligs[b.BlockId] = lig
			}
			if b.MemoColumn != "" {
				// A pack's column: the readers' own footer check first.
				k, err := canon.ParseKey(in.ComponentKey)
				if err != nil {
					tb.Fatal(err)
				}
				meta, err := block.ReadFooter(context.Background(), store, b.MemoObject)
				if err == nil {
					_, err = block.CheckMember(meta, b.MemoColumn, k, raw.Ref().Memo(b.Version), in.Type, raw.Rows)
				}
				if err != nil {
					tb.Errorf("%s/%s input %s block %s: %v", sol.Client, sol.Pipeline, in.Input, b.BlockId, err)
					continue
				}
			}
			d, err := CheckMemo(context.Background(), store, b.MemoObject, b.MemoColumn, lig, in.Input)
			if err != nil {
				tb.Fatalf("%s/%s input %s block %s: %v", sol.Client, sol.Pipeline, in.Input, b.BlockId, err)
			}
			if d != "" {
				tb.Errorf("%s/%s input %s block %s: memo object %s differs from LIG: %s", sol.Client, sol.Pipeline, in.Input, b.BlockId, b.MemoObject, d)
			}
			checked++
		}
	}
	if checked == 0 {
		tb.Errorf("%s/%s: no memo object to compare", sol.Client, sol.Pipeline)
	}
}

// RewriteMemo rewrites, in place at its key, the memo data of a memo entry
// naming object and column: edit returns the new column from the old one,
// and the object keeps every other column, byte for byte (a pack's other
// members, issue 28; an object of one component's event_id), and is
// written with its checksums to match, as a faulty worker would write it.
// column "" is an object of one component (its value). It returns the
// bytes of the edited column's segment and, for an object of one
// component, the object's size (what a worker reports).
func RewriteMemo(ctx context.Context, store *objstore.Store, object, column string, edit func(arrow.Array) (arrow.Array, error)) (int64, error) {
	meta, rec, err := block.ReadBlock(ctx, store, object)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	opts := block.EncodeOptions{Columns: map[string]block.Compression{}}
	for _, c := range meta.Columns {
		opts.Columns[c.Name] = c.Compression
	}
	if column == "" {
		v, err := edit(rec.Column(1))
		if err != nil {
			return 0, err
		}
		defer v.Release()
		out := arrowRecord(rec.Column(0), block.MemoColumn, v)
		defer out.Release()
		m := meta
		m.Columns, m.Size, m.Rows = nil, 0, 0
		written, err := block.WriteWith(ctx, store, m, out, opts)
		return written.Size, err
	}
	raw := meta
	raw.Pack, raw.Key = false, block.RawKey(meta.Source, meta.Ref())
	var members []block.PackMember
	found := false
	for i, c := range meta.Columns[1:] {
		k, err := canon.ParseKey(c.Name)
		if err != nil {
			return 0, err
		}
		v := rec.Column(i + 1)
		if c.Name == column {
			if v, err = edit(v); err != nil {
				return 0, err
			}
			defer v.Release()
			found = true
		}
		members = append(members, block.PackMember{Component: k, Block: meta.Member(c), Value: v})
	}
	if !found {
		return 0, fmt.Errorf("pack %s has no column %s", object, column)
	}
	data, m, err := block.EncodePack(object, raw, rec.Column(0), members, opts)
	if err != nil {
		return 0, err
	}
	if _, err := store.PutChecksummed(ctx, object, data, m.Checksum, map[string]string{"Sig-Block": m.ID}); err != nil {
		return 0, err
	}
	c, _ := m.Column(column)
	return c.Length, nil
}

// arrowRecord is a record of event_id and one column.
func arrowRecord(ids arrow.Array, name string, v arrow.Array) arrow.Record {
	s := arrow.NewSchema([]arrow.Field{
		{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64},
		{Name: name, Type: v.DataType(), Nullable: true},
	}, nil)
	return array.NewRecord(s, []arrow.Array{ids, v}, int64(v.Len()))
}

// Rotate is a RewriteMemo edit: every row holds the next row's value (the
// last the first's): valid Arrow, the raw block's rows, wrong values.
func Rotate(v arrow.Array) (arrow.Array, error) {
	head, tail := array.NewSlice(v, 1, int64(v.Len())), array.NewSlice(v, 0, 1)
	defer head.Release()
	defer tail.Release()
	return array.Concatenate([]arrow.Array{head, tail}, memory.DefaultAllocator)
}
