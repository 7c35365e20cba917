package reader

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestBlockVersions (issue 21): a unit may name a raw block version and
// memo objects of earlier input versions. Version 2 of a block whose labels
// changed serves the feature inputs from the version 1 memo objects, byte
// for byte what computing them from the version 2 raw block gives; a raw
// object whose footer is another version, or a memo object whose footer is
// another input version than its key says, is DataLoss.
func TestBlockVersions(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 500, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	blk := f.blocks[0]
	_, rec, err := block.ReadBlock(ctx, f.store, blk.meta.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	v2 := blk.meta.Clone()
	v2.Key, v2.Version, v2.ColumnVersions = block.RawKey("ads", blockref.New(blk.id, 2)), 2, map[string]int64{"click": 2}
	v2.Changes = []block.Change{{Version: 2, Topic: "raw.ads", First: 1 << 20, Last: 1 << 20, UpdatedRows: 1, Columns: []string{"click"}}}
	if _, err := block.Write(ctx, f.store, v2, rec); err != nil {
		t.Fatal(err)
	}

	at2 := func(mode func(int) readerv1.InputMode) *readerv1.WorkUnit {
		u := f.unit(0, 100, mode)
		u.RawObject = v2.Key
		return u
	}
	bytesOf := func(u *readerv1.WorkUnit) []byte {
		t.Helper()
		resps, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
		if err != nil {
			t.Fatalf("unit at %s: %v", u.RawObject, err)
		}
		var out []byte
		for _, r := range resps {
			out = append(out, r.ArrowIpc...)
		}
		return out
	}
	sig, lig := bytesOf(at2(nil)), bytesOf(at2(allMode(local)))
	if !bytes.Equal(sig, lig) || !bytes.Equal(sig, bytesOf(f.unit(0, 100, nil))) {
		t.Fatal("version 2 (labels unchanged in value): SIG, LIG and version 1 bytes differ")
	}

	// A raw object at version 3's key holding version 2; a memo object at
	// input version 2's key holding input version 1.
	copyObject := func(from, to string) {
		t.Helper()
		data, _, err := f.store.Get(ctx, from)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Put(ctx, to, data, nil); err != nil {
			t.Fatal(err)
		}
	}
	copyObject(v2.Key, block.RawKey("ads", blockref.New(blk.id, 3)))
	u := at2(nil)
	u.RawObject = block.RawKey("ads", blockref.New(blk.id, 3))
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); Status(err).Code() != codes.DataLoss || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("raw object of version 3 holding version 2: %v, want DataLoss", err)
	}
	k := f.inputs[0].key
	copyObject(block.MemoKey(k, blockref.ParseMemo(blk.id)), block.MemoKey(k, blockref.ParseMemo(blk.id+".v2")))
	u = at2(nil)
	u.Inputs[0].MemoObject = block.MemoKey(k, blockref.ParseMemo(blk.id+".v2"))
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); Status(err).Code() != codes.DataLoss || !strings.Contains(err.Error(), "input version 1") {
		t.Fatalf("memo object of input version 2 holding 1: %v, want DataLoss", err)
	}
}
