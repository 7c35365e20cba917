package reader

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestMemoPendingIsRetryable: a MEMO input whose state is pending, or whose
// object is missing (evicted), fails the call with Unavailable, a
// recognizable "memo pending" status naming the input, component and block,
// and sends no batch; the same unit with that input LOCAL succeeds.
func TestMemoPendingIsRetryable(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 1000, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	victim := f.inputs[1]

	pendingState := f.unit(0, 100, nil)
	pendingState.Inputs[1].MemoState = sigv1.BlockState_BLOCK_STATE_PENDING

	if err := f.store.Delete(ctx, block.MemoKey(victim.key, blockref.ParseMemo(f.blocks[0].id))); err != nil {
		t.Fatal(err)
	}
	evicted := f.unit(0, 100, nil)

	for name, u := range map[string]*readerv1.WorkUnit{"state pending": pendingState, "object missing": evicted} {
		resps, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
		if len(resps) != 0 {
			t.Fatalf("%s: %d responses before the error", name, len(resps))
		}
		st := Status(err)
		if st.Code() != codes.Unavailable || !IsMemoPending(st.Err()) || !IsMemoPending(err) {
			t.Fatalf("%s: %v (code %v), want Unavailable memo pending", name, err, st.Code())
		}
		for _, want := range []string{"memo pending: ", victim.name, victim.key.String(), f.blocks[0].id} {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("%s: message %q does not name %q", name, st.Message(), want)
			}
		}
		info := errorInfo(t, st.Details())
		if info.Reason != ReasonMemoPending || info.Metadata["input"] != victim.name ||
			info.Metadata["component"] != victim.key.String() || info.Metadata["block"] != f.blocks[0].id {
			t.Errorf("%s: detail %v", name, info)
		}
	}
	// Reading the missing input locally needs no memo object.
	u := f.unit(0, 100, func(i int) readerv1.InputMode {
		if i == 1 {
			return local
		}
		return memo
	})
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); err != nil {
		t.Fatalf("input read LOCAL: %v", err)
	}
	if got := s.Stats().MemoPending; got != 2 {
		t.Fatalf("MemoPending = %d, want 2", got)
	}

	failed := f.unit(0, 100, nil)
	failed.Inputs[0].MemoState = sigv1.BlockState_BLOCK_STATE_FAILED
	_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: failed})
	if st := Status(err); st.Code() != codes.FailedPrecondition || IsMemoPending(err) || !strings.HasPrefix(st.Message(), "memo failed: ") {
		t.Fatalf("failed memo: %v, want FailedPrecondition \"memo failed\"", err)
	}
}

func errorInfo(t *testing.T, details []any) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range details {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	t.Fatalf("no ErrorInfo detail in %v", details)
	return nil
}

// TestCorruptMemoIsDataLoss: a memo object whose bytes rotted, that belongs
// to another block, that is not row-aligned with the raw block, or whose
// column has the wrong type fails with DataLoss naming the object.
func TestCorruptMemoIsDataLoss(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: 1000, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	blk := f.blocks[0]
	key := func(i int) string { return block.MemoKey(f.inputs[i].key, blockref.ParseMemo(blk.id)) }
	restore := func(i int) {
		if err := f.memoize(ctx, 0, f.inputs[i], block.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	rewrite := func(i int, edit func(ids, val arrow.Array) (arrow.Array, arrow.Array)) {
		m, rec, err := block.ReadBlock(ctx, f.store, key(i))
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		ids, val := edit(rec.Column(0), rec.Column(1))
		nrec := memoRecord(ids, val)
		defer nrec.Release()
		if _, err := block.Write(ctx, f.store, block.Meta{Key: m.Key, ID: m.ID, Source: m.Source, ComponentKey: m.ComponentKey,
			SchemaFingerprint: m.SchemaFingerprint}, nrec); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		input int
		spoil func()
		want  string
	}{
		{"bit rot", 0, func() {
			data, _, err := f.store.Get(ctx, key(0))
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/3] ^= 0x40
			if _, err := f.store.Put(ctx, key(0), data, nil); err != nil {
				t.Fatal(err)
			}
		}, "checksum"},
		{"other block", 1, func() {
			data, _, err := f.store.Get(ctx, block.MemoKey(f.inputs[1].key, blockref.ParseMemo(f.blocks[1].id)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Put(ctx, key(1), data, nil); err != nil {
				t.Fatal(err)
			}
		}, "of block \"" + f.blocks[1].id},
		{"rows swapped", 2, func() {
			rewrite(2, func(ids, val arrow.Array) (arrow.Array, arrow.Array) {
				v := append([]int64(nil), ids.(*array.Int64).Int64Values()...)
				v[10], v[11] = v[11], v[10]
				b := array.NewInt64Builder(memory.DefaultAllocator)
				b.AppendValues(v, nil)
				val.Retain()
				return b.NewArray(), val
			})
		}, "row 10 has event_id"},
		{"wrong type", 1, func() {
			rewrite(1, func(ids, val arrow.Array) (arrow.Array, arrow.Array) {
				ids.Retain()
				ids.Retain()
				return ids, ids
			})
		}, "value has type int64, want list<int64>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f.inputs[1].typ.String() != "list<int64>" {
				t.Fatalf("fixture input 1 is %s, want list<int64>", f.inputs[1].typ)
			}
			tc.spoil()
			defer restore(tc.input)
			_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 100, nil)})
			st := Status(err)
			t.Log(st.Message())
			if st.Code() != codes.DataLoss || !strings.Contains(st.Message(), key(tc.input)) || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("%v (code %v), want DataLoss naming %s and %q", err, st.Code(), key(tc.input), tc.want)
			}
			// The same unit reading that input LOCAL does not touch the object.
			u := f.unit(0, 100, func(i int) readerv1.InputMode {
				if i == tc.input {
					return local
				}
				return memo
			})
			if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); err != nil {
				t.Fatalf("with the input LOCAL: %v", err)
			}
		})
	}
}

// TestBadUnitIsInvalidArgument: every malformed unit is refused with
// InvalidArgument naming the field, before any batch is sent.
func TestBadUnitIsInvalidArgument(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 500, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	otherKey := f.inputs[2].key.String()
	for _, tc := range []struct {
		name  string
		edit  func(u *readerv1.WorkUnit, req *readerv1.ReadRequest)
		field string
	}{
		{"bad dsl", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[0].CanonicalDsl = "input out = lower(col(\"query\")"
		}, "inputs[0].canonical_dsl"},
		{"unknown column", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[2].CanonicalDsl = "input out = hash(col(\"quer\"))"
		}, "inputs[2].canonical_dsl"},
		{"dsl of another component", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[0].ComponentKey = otherKey
			u.Inputs[0].MemoObject = block.MemoKey(f.inputs[2].key, blockref.ParseMemo(f.blocks[0].id))
		}, "inputs[0].canonical_dsl"},
		{"two inputs in dsl", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[2].CanonicalDsl += "\ninput out2 = col(\"query\")"
		}, "inputs[2].canonical_dsl"},
		{"oversized dsl", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[0].CanonicalDsl += "\n#" + strings.Repeat("x", 1<<20)
		}, "inputs[0].canonical_dsl"},
		{"bad key", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[1].ComponentKey = "abc" }, "inputs[1].component_key"},
		{"bad type", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[1].Type = "list<float64>" }, "inputs[1].type"},
		{"type mismatch", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[2].Type = "float64" }, "inputs[2].type"},
		{"duplicate input", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[2].Name = u.Inputs[0].Name }, "inputs[2].name"},
		{"input named like a label", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[0].Name = "click" }, "inputs[0].name"},
		{"empty input name", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[0].Name = "" }, "inputs[0].name"},
		{"mode unspecified", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[1].Mode = 0 }, "inputs[1].mode"},
		{"memo state unspecified", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Inputs[1].MemoState = 0 }, "inputs[1].memo_state"},
		{"memo object of another block", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[1].MemoObject = "memo/" + u.Inputs[1].ComponentKey + "/other.arrow"
		}, "inputs[1].memo_object"},
		{"label not in schema", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.LabelColumns = []string{"click", "clicks"} }, "label_columns[1]"},
		{"label twice", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.LabelColumns = []string{"click", "click"} }, "label_columns[1]"},
		{"event_id as label", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.LabelColumns = []string{"event_id"} }, "label_columns[0]"},
		{"batch too large", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.BatchRows = 1 << 20 }, "batch_rows"},
		{"raw object of another block", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.RawObject = "raw/ads/x.arrow" }, "raw_object"},
		// Versions (issue 21): a memo object's input version is at most the
		// raw block's; versions are written one way only.
		{"memo object past the raw version", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.Inputs[1].MemoObject = "memo/" + u.Inputs[1].ComponentKey + "/" + u.BlockId + ".v2.arrow"
		}, "inputs[1].memo_object"},
		{"memo object of version 1 spelled .v1", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.RawObject = "raw/ads/" + u.BlockId + ".v3.arrow"
			u.Inputs[1].MemoObject = "memo/" + u.Inputs[1].ComponentKey + "/" + u.BlockId + ".v1.arrow"
		}, "inputs[1].memo_object"},
		{"raw version with a leading zero", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.RawObject = "raw/ads/" + u.BlockId + ".v02.arrow"
		}, "raw_object"},
		{"bad block id", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.BlockId = "../x" }, "block_id"},
		{"bad schema", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.RawSchemaJson = `{"source": "ads"}` }, "raw_schema_json"},
		{"source mismatch", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.RawSource = "clicks" }, "raw_source"},
		{"schema of other blocks", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			u.RawSchemaJson = `{"source": "ads", "fields": [{"name": "event_id", "type": "int64"}, {"name": "event_time", "type": "int64"},
				{"name": "click", "type": "int64"}, {"name": "conversion", "type": "int64"}]}`
			u.Inputs = nil
		}, "raw_schema_json"},
		{"too many inputs", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) {
			for len(u.Inputs) <= 1024 {
				u.Inputs = append(u.Inputs, u.Inputs[0])
			}
		}, "inputs"},
		{"control byte in name", func(u *readerv1.WorkUnit, _ *readerv1.ReadRequest) { u.Pipeline = "p\n1" }, "pipeline"},
		{"negative start", func(_ *readerv1.WorkUnit, r *readerv1.ReadRequest) { r.StartRow = -1 }, "start_row"},
		{"start past end", func(_ *readerv1.WorkUnit, r *readerv1.ReadRequest) { r.StartRow = 501 }, "start_row"},
		{"no unit", func(_ *readerv1.WorkUnit, r *readerv1.ReadRequest) { r.Unit = nil }, "unit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := f.unit(0, 100, allMode(local))
			u.Inputs[1].Mode = memo
			req := &readerv1.ReadRequest{Unit: u}
			tc.edit(u, req)
			resps, err := collect(ctx, s, req)
			st := Status(err)
			if st.Code() != codes.InvalidArgument || len(resps) != 0 {
				t.Fatalf("%v (code %v, %d responses), want InvalidArgument", err, st.Code(), len(resps))
			}
			if !strings.HasPrefix(st.Message(), "invalid work unit: "+tc.field+": ") {
				t.Fatalf("message %q does not name field %s", st.Message(), tc.field)
			}
			t.Log(st.Message())
			if info := errorInfo(t, st.Details()); info.Metadata["field"] != tc.field {
				t.Fatalf("detail names field %q, want %q", info.Metadata["field"], tc.field)
			}
		})
	}

	// A unit of a block that does not exist.
	u := f.unit(0, 100, nil)
	u.BlockId, u.RawObject = "nosuchblock", "raw/ads/nosuchblock.arrow"
	u.Inputs = nil
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); Status(err).Code() != codes.NotFound {
		t.Fatalf("missing raw block: %v, want NotFound", err)
	}
}
