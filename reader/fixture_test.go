package reader

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/examples"
	"github.com/sigdata/sig/internal/devenv"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
)

// fixture is a warehouse in a real MinIO: raw blocks from the Ads generator,
// the components of some model graphs, and their memo objects written the
// way SIG workers write them (sigd Runner.compute).
type fixture struct {
	minio  *devenv.MinIO
	store  *objstore.Store
	schema *transform.Schema
	blocks []fixtureBlock
	inputs []fixtureInput
	wide   bool // fixtureConfig.WideMemos
	// packs, when fixtureConfig.Packed, is where each block's components
	// went: packs[b][component].
	packs []map[canon.Key]block.Packed
}

type fixtureBlock struct {
	id   string
	meta block.Meta
	rows int64
}

// fixtureInput is one model input: its component and canonical DSL, as a
// read solution gives them.
type fixtureInput struct {
	name    string
	key     canon.Key
	typ     transform.Type
	dsl     string
	columns []string
	// nodes are the non-col nodes of the component (its root included),
	// each as the component it roots, when fixtureConfig.Nodes is set.
	nodes []fixtureInput
}

type fixtureConfig struct {
	Blocks       int
	RowsPerBlock int
	// Graphs are DSL texts; every model input of each becomes a unit input,
	// named <graph index>_<input name>.
	Graphs []string
	// Nulls sets some raw values null (query, ad_title, bid_price, country),
	// so that null handling is part of every comparison.
	Nulls bool
	// NoMemos leaves the memo objects unwritten.
	NoMemos bool
	// Nodes memoizes every non-col node of every component too (covers).
	Nodes bool
	// RawCompression and MemoCompression are the segment compression of
	// the raw blocks and of the memo objects' value segments (zero:
	// uncompressed, as every object before compression).
	RawCompression, MemoCompression block.Compression
	// WideMemos stores memo values in their declared type, as objects
	// written before issue 28 are; workers, and by default the fixture,
	// store an int64 or list<int64> value in the narrowest integer type
	// that holds it (block.EncodeOptions.Narrow).
	WideMemos bool
	// Packed writes each block's memo columns (every component's, and
	// every node's with Nodes) into packs, as a worker's batch does
	// (workers/memo RunBatch: block.WritePacks), rather than an object
	// per component; units name each input's pack and column.
	Packed bool
	// Late is the generator's LateFraction (0: its default, 0.001; -1:
	// none): late events have event times hours before their block's
	// others, so a block's event times are out of order.
	Late float64
}

func fleetGraphs(tb testing.TB, names ...string) []string {
	tb.Helper()
	var out []string
	for _, n := range names {
		b, err := fs.ReadFile(examples.Fleet, "fleet/"+n+".sig")
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func newStore(tb testing.TB, m *devenv.MinIO) *objstore.Store {
	tb.Helper()
	return m.NewStore(tb, objstore.Config{Bucket: "sig", RetryFor: 5 * time.Second})
}

func newFixture(tb testing.TB, cfg fixtureConfig) *fixture {
	tb.Helper()
	m := devenv.NewMinIO(tb)
	f := &fixture{minio: m, store: newStore(tb, m), schema: transform.AdsSchema(), wide: cfg.WideMemos}
	ctx := context.Background()
	reg := transform.Default()
	for gi, src := range cfg.Graphs {
		g, err := transform.Parse([]byte(src), fmt.Sprintf("graph%d", gi), transform.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		c, err := canon.Canonicalize(g, f.schema, reg, transform.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		for i := range c.Components {
			comp := &c.Components[i]
			in := fixtureInput{name: fmt.Sprintf("g%d_%s", gi, comp.Input), key: comp.Key,
				typ: comp.Type, dsl: c.DSL(comp, "out"), columns: comp.Columns}
			if cfg.Nodes {
				for _, j := range comp.Nodes {
					if c.Nodes[j].Op == "col" {
						continue
					}
					cone := c.Cone(j, "out")
					in.nodes = append(in.nodes, fixtureInput{name: in.name + "_" + cone.Key.Short(), key: cone.Key,
						typ: cone.Type, dsl: c.DSL(&cone, "out"), columns: cone.Columns})
				}
			}
			f.inputs = append(f.inputs, in)
		}
	}
	gn := gen.New(gen.Config{Seed: 7, LateFraction: cfg.Late})
	hour := int64(time.Hour / time.Microsecond)
	first := int64(0)
	for b := 0; b < cfg.Blocks; b++ {
		rec := gn.Records(cfg.RowsPerBlock, cfg.RowsPerBlock)[0]
		if cfg.Nulls {
			nrec := withNulls(rec)
			rec.Release()
			rec = nrec
		}
		window := time.Date(2026, 1, 1, b, 0, 0, 0, time.UTC).UnixMicro()
		kr := block.KafkaRange{Topic: "raw.ads", Partition: 0, First: first, Last: first + int64(cfg.RowsPerBlock) - 1}
		first += int64(cfg.RowsPerBlock)
		id := block.ID(window, kr)
		meta, err := block.WriteWith(ctx, f.store, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
			WindowStart: window, WindowLength: hour, SchemaFingerprint: f.schema.Fingerprint(), Kafka: &kr}, rec,
			block.EncodeOptions{Compression: cfg.RawCompression})
		rec.Release()
		if err != nil {
			tb.Fatal(err)
		}
		f.blocks = append(f.blocks, fixtureBlock{id: id, meta: meta, rows: meta.Rows})
		if !cfg.NoMemos && cfg.Packed {
			if err := f.memoizePacked(ctx, b, cfg.MemoCompression); err != nil {
				tb.Fatal(err)
			}
		} else if !cfg.NoMemos {
			done := map[canon.Key]bool{}
			for i := range f.inputs {
				for _, in := range append([]fixtureInput{f.inputs[i]}, f.inputs[i].nodes...) {
					if done[in.key] {
						continue
					}
					done[in.key] = true
					if err := f.memoize(ctx, b, in, cfg.MemoCompression); err != nil {
						tb.Fatal(err)
					}
				}
			}
		}
	}
	return f
}

// memoize writes the memo object of component in for block b exactly as a SIG
// worker does (workers/memo's Runner): parse the canonical DSL, read
// only the component's columns, run it, write {event_id, value}, the
// value narrowed unless the fixture is WideMemos.
func (f *fixture) memoize(ctx context.Context, b int, in fixtureInput, comp block.Compression) error {
	blk := f.blocks[b]
	eventID, value, err := f.compute(ctx, b, in)
	if err != nil {
		return err
	}
	defer eventID.Release()
	defer value.Release()
	memo := memoRecord(eventID, value)
	defer memo.Release()
	m := blk.meta
	ev, _ := m.Column(transform.ColEventID)
	opts := block.EncodeOptions{Compression: comp, Columns: map[string]block.Compression{transform.ColEventID: ev.Compression}}
	if !f.wide {
		opts.Narrow = []string{MemoColumn}
	}
	_, err = block.WriteWith(ctx, f.store, block.Meta{Key: block.MemoKey(in.key, blockref.ParseMemo(blk.id)), ID: blk.id, Source: "ads",
		ComponentKey: in.key, WindowStart: m.WindowStart, WindowLength: m.WindowLength,
		MinEventTime: m.MinEventTime, MaxEventTime: m.MaxEventTime, SchemaFingerprint: m.SchemaFingerprint}, memo, opts)
	return err
}

// compute runs component in over block b's columns, as a worker does, and
// returns the block's event ids and the component's values.
func (f *fixture) compute(ctx context.Context, b int, in fixtureInput) (eventID, value arrow.Array, err error) {
	g, _, err := transform.ParseAndCheck([]byte(in.dsl), "component", f.schema, transform.Default(), transform.Limits{})
	if err != nil {
		return nil, nil, err
	}
	raw, err := block.ReadColumns(ctx, f.store, f.blocks[b].meta, in.columns)
	if err != nil {
		return nil, nil, err
	}
	defer raw.Release()
	if err := transform.CheckRecord(g, f.schema, raw); err != nil {
		return nil, nil, err
	}
	out, err := transform.Run(g, transform.Default(), raw, g.Inputs[0].Node)
	if err != nil {
		return nil, nil, err
	}
	eventID = raw.Column(0)
	eventID.Retain()
	return eventID, out[0], nil
}

// memoizePacked writes the memo columns of every component (and node) of
// block b into packs, as a worker's batch does, and records where each
// went (f.packs[b]).
func (f *fixture) memoizePacked(ctx context.Context, b int, comp block.Compression) error {
	blk := f.blocks[b]
	var members []block.PackMember
	var eventID arrow.Array
	defer func() {
		for _, m := range members {
			m.Value.Release()
		}
		if eventID != nil {
			eventID.Release()
		}
	}()
	done := map[canon.Key]bool{}
	for i := range f.inputs {
		for _, in := range append([]fixtureInput{f.inputs[i]}, f.inputs[i].nodes...) {
			if done[in.key] {
				continue
			}
			done[in.key] = true
			ids, value, err := f.compute(ctx, b, in)
			if err != nil {
				return err
			}
			if eventID == nil {
				eventID = ids
			} else {
				ids.Release()
			}
			members = append(members, block.PackMember{Component: in.key, Block: blockref.ParseMemo(blk.id), Value: value})
		}
	}
	_, packed, err := block.WritePacks(ctx, f.store, blk.meta, eventID, members,
		block.PackOptions{EncodeOptions: block.EncodeOptions{Compression: comp}, Wide: f.wide})
	if err != nil {
		return err
	}
	for len(f.packs) <= b {
		f.packs = append(f.packs, nil)
	}
	f.packs[b] = map[canon.Key]block.Packed{}
	for _, p := range packed {
		f.packs[b][p.Component] = p
	}
	return nil
}

// memoOf returns the memo object and column of component k for block b:
// its pack and column when the fixture is Packed, else the object of one
// component (column "").
func (f *fixture) memoOf(b int, k canon.Key) (object, column string) {
	if b < len(f.packs) && f.packs[b] != nil {
		p := f.packs[b][k]
		return p.Object, p.Column.Name
	}
	return block.MemoKey(k, blockref.ParseMemo(f.blocks[b].id)), ""
}

// memoRecord is sigd.MemoRecord: the record of a memo object.
func memoRecord(eventID, value arrow.Array) arrow.Record {
	s := arrow.NewSchema([]arrow.Field{
		{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64},
		{Name: MemoColumn, Type: value.DataType(), Nullable: true},
	}, nil)
	return array.NewRecord(s, []arrow.Array{eventID, value}, int64(value.Len()))
}

// unit returns the work unit of block b with every input in mode(i) (nil:
// all MEMO), every memo READY.
func (f *fixture) unit(b int, batchRows int, mode func(i int) readerv1.InputMode) *readerv1.WorkUnit {
	blk := f.blocks[b]
	u := &readerv1.WorkUnit{UnitId: fmt.Sprintf("u%d", b), Client: "ctr", Pipeline: "p1", RawSource: "ads",
		BlockId: blk.id, RawObject: blk.meta.Key, BatchRows: uint32(batchRows)}
	for i, in := range f.inputs {
		m := readerv1.InputMode_INPUT_MODE_MEMO
		if mode != nil {
			m = mode(i)
		}
		object, column := f.memoOf(b, in.key)
		u.Inputs = append(u.Inputs, &readerv1.ModelInput{Name: in.name, ComponentKey: in.key.String(),
			Type: in.typ.String(), CanonicalDsl: in.dsl, MemoObject: object, MemoColumn: column,
			MemoState: sigv1.BlockState_BLOCK_STATE_READY, Mode: m})
	}
	return u
}

func allMode(m readerv1.InputMode) func(int) readerv1.InputMode {
	return func(int) readerv1.InputMode { return m }
}

const (
	memo  = readerv1.InputMode_INPUT_MODE_MEMO
	local = readerv1.InputMode_INPUT_MODE_LOCAL
)

func (f *fixture) server(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	cfg.Store = f.store
	s, err := NewServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// collect runs one Serve and returns its responses.
func collect(ctx context.Context, s *Server, req *readerv1.ReadRequest) ([]*readerv1.ReadResponse, error) {
	var out []*readerv1.ReadResponse
	err := s.Serve(ctx, req, func(r *readerv1.ReadResponse) error {
		r.ArrowIpc = bytes.Clone(r.ArrowIpc) // Serve reuses the buffer
		out = append(out, r)
		return nil
	})
	return out, err
}

// withNulls returns rec with some values of query, ad_title, bid_price and
// country set to null (every 7th, 11th, 13th and 17th row).
func withNulls(rec arrow.Record) arrow.Record {
	every := map[string]int{"query": 7, "ad_title": 11, "bid_price": 13, "country": 17}
	cols := make([]arrow.Array, rec.NumCols())
	for i, fld := range rec.Schema().Fields() {
		k, ok := every[fld.Name]
		if !ok {
			cols[i] = rec.Column(i)
			cols[i].Retain()
			continue
		}
		b := array.NewBuilder(memory.DefaultAllocator, fld.Type)
		for r := 0; r < int(rec.NumRows()); r++ {
			switch c := rec.Column(i).(type) {
			case *array.String:
				if r%k == 3 {
					b.AppendNull()
				} else {
					b.(*array.StringBuilder).Append(c.Value(r))
				}
			case *array.Float64:
				if r%k == 3 {
					b.AppendNull()
				} else {
					b.(*array.Float64Builder).Append(c.Value(r))
				}
			}
		}
		cols[i] = b.NewArray()
		b.Release()
	}
	out := array.NewRecord(rec.Schema(), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// inputNames returns the fixture's input names (for messages).
func (f *fixture) inputNames() string {
	var s []string
	for _, in := range f.inputs {
		s = append(s, in.name)
	}
	return strings.Join(s, ",")
}

// computed returns what a LIG read of raw serves, column by column, and
// the columns' names: event_id and the labels, then every input computed
// from raw with the row-at-a-time reference (transform.Run), each
// released when the test ends.
func (f *fixture) computed(t *testing.T, raw arrow.Record) ([]arrow.Array, []string) {
	t.Helper()
	want := []arrow.Array{column(raw, "event_id"), column(raw, "click"), column(raw, "conversion")}
	names := []string{"event_id", "click", "conversion"}
	for _, in := range f.inputs {
		g, _, err := transform.ParseAndCheck([]byte(in.dsl), in.name, f.schema, transform.Default(), transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := transform.Run(g, transform.Default(), raw, g.Inputs[0].Node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(out[0].Release)
		want = append(want, out[0])
		names = append(names, in.name)
	}
	return want, names
}
