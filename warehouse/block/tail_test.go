package block_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
)

// TestFetchTail reads the last column's segment and the footer in one
// request, and checks the segment as FetchSegments does: the same bytes,
// the same Meta; a column that is not last is ErrNotTail; a flipped byte
// in the segment (the CRC computed over chunk boundaries: the segment is
// several 256 KiB read chunks long) or in the footer is ErrCorrupt.
func TestFetchTail(t *testing.T) {
	_, s := newStore(t)
	ctx := context.Background()
	rec := testRecord(120_000)
	defer rec.Release()
	data, meta, err := block.Encode(testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, meta.Key, data, nil); err != nil {
		t.Fatal(err)
	}
	last := meta.Columns[len(meta.Columns)-1]
	if last.Length < 600<<10 {
		t.Fatalf("last column %s is %d bytes: too short to span read chunks", last.Name, last.Length)
	}
	got, seg, err := block.FetchTail(ctx, s, meta.Key, last.Offset, last.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := block.FetchSegments(ctx, s, meta, []string{last.Name})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(seg, want[0]) || got.Rows != meta.Rows || got.ID != meta.ID || len(got.Columns) != len(meta.Columns) || got.Size != int64(len(data)) {
		t.Fatalf("tail: segment equal %v, meta %+v", bytes.Equal(seg, want[0]), got)
	}

	first := meta.Columns[0]
	if _, _, err := block.FetchTail(ctx, s, meta.Key, first.Offset+first.Length, first.Name, nil); !errors.Is(err, block.ErrNotTail) {
		t.Fatalf("a column that is not last: %v, want ErrNotTail", err)
	}
	if _, _, err := block.FetchTail(ctx, s, meta.Key, last.Offset+8, last.Name, nil); !errors.Is(err, block.ErrNotTail) {
		t.Fatalf("the wrong offset: %v, want ErrNotTail", err)
	}
	if _, _, err := block.FetchTail(ctx, s, "raw/none.arrow", 0, last.Name, nil); err == nil {
		t.Fatal("a missing object read")
	}

	for _, at := range []int64{last.Offset + 3, last.Offset + 300<<10, last.Offset + last.Length - 1, int64(len(data)) - block.TrailerSize - 5} {
		bad := append([]byte(nil), data...)
		bad[at] ^= 0x40
		key := "raw/ads/corrupt.arrow"
		if _, err := s.Put(ctx, key, bad, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := block.FetchTail(ctx, s, key, last.Offset, last.Name, nil); !errors.Is(err, block.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", at, err)
		}
	}
}

// TestTruncatedObjectIsCorrupt: a block object cut short anywhere, to
// nothing included, is ErrCorrupt to ReadFooter, ReadBlock and FetchTail,
// never an object-store error (which readers report as an outage to
// retry): a 0-byte object was one, as MinIO answers a suffix range of an
// empty object with a Content-Range objstore refused.
func TestTruncatedObjectIsCorrupt(t *testing.T) {
	_, s := newStore(t)
	ctx := context.Background()
	rec := testRecord(1000)
	defer rec.Release()
	data, meta, err := block.Encode(testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	last := meta.Columns[len(meta.Columns)-1]
	for _, n := range []int{0, 1, block.TrailerSize - 1, block.TrailerSize, int(meta.FooterOffset), len(data) - 1} {
		if _, err := s.Put(ctx, meta.Key, data[:n], nil); err != nil {
			t.Fatal(err)
		}
		if _, err := block.ReadFooter(ctx, s, meta.Key); !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%d bytes: ReadFooter: %v, want ErrCorrupt", n, err)
		}
		if _, _, err := block.ReadBlock(ctx, s, meta.Key); !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%d bytes: ReadBlock: %v, want ErrCorrupt", n, err)
		}
		if n > int(last.Offset) {
			if _, _, err := block.FetchTail(ctx, s, meta.Key, last.Offset, last.Name, nil); !errors.Is(err, block.ErrCorrupt) {
				t.Errorf("%d bytes: FetchTail: %v, want ErrCorrupt", n, err)
			}
		}
	}
}
