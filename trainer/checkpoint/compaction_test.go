package checkpoint

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/sigdata/sig/warehouse/blockref"
)

// TestLedgerCompaction (issue 28): a compacted block c of parts b2, b3@2
// and b4 is one block whose parts are older versions: an event of a part
// trained in the part's unit at the version compacted may not be trained
// again in c's version 1 (the same event version), may be in c's version 2
// (a newer one), and in c's version 1 when the job trained an older
// version of the part; without the lineage the ledger could tell none of
// it. A ledger with a lineage round-trips; one without is written as
// before, byte for byte.
func TestLedgerCompaction(t *testing.T) {
	parts := []blockref.Ref{ref("b2"), ref("b3.v2"), ref("b4")}
	build := func(cv1 []int64, more func(*Ledger)) *Ledger {
		var l Ledger
		l.Unit(ref("b1")).Add([]int64{1, 2, 3})
		l.Unit(ref("b2")).Add([]int64{4, 5, 6}) // the job trained b2 at the version compacted
		l.Unit(ref("b3")).Add([]int64{7, 8})    // and b3 at version 1; c holds b3.v2
		c := l.Unit(ref("c"))
		c.Add(cv1)
		c.Parts = parts
		if more != nil {
			more(&l)
		}
		return &l
	}
	// c's version 1 without b2's rows: b3's events again (newer) and b4's.
	ok := build([]int64{7, 8, 9, 10, 11}, nil)
	if err := ok.Check(); err != nil {
		t.Fatalf("c without the rows of the part trained: %v", err)
	}
	// b2's events again in c's version 1: the same event versions twice.
	if err := build([]int64{4, 5, 6, 7, 8, 9, 10, 11}, nil).Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("c with the rows of a part trained: %v, want ErrDuplicate", err)
	}
	// c's version 2 retrains every event of c.
	v2 := build([]int64{7, 8, 9, 10, 11}, func(l *Ledger) {
		u := l.Unit(ref("c.v2"))
		u.Add([]int64{4, 5, 6, 7, 8, 9, 10, 11, 12})
		u.Parts = parts
	})
	if err := v2.Check(); err != nil {
		t.Fatalf("c's version 2: %v", err)
	}
	// Only through the lineage: without it c and b2 are two blocks.
	nolineage := v2.Clone()
	for i := range nolineage.Units {
		nolineage.Units[i].Parts = nil
	}
	if err := nolineage.Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("c.v2 and b2 without the lineage: %v, want ErrDuplicate", err)
	}
	// Another block may still not hold them.
	if err := build([]int64{7, 8, 9, 10, 11}, func(l *Ledger) { l.Unit(ref("b5")).Add([]int64{9}) }).Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("an event of c in b5: %v, want ErrDuplicate", err)
	}

	b, _ := v2.MarshalBinary()
	if !bytes.HasPrefix(b, []byte(ledgerMagic2)) {
		t.Fatalf("a ledger with a lineage starts %q", b[:11])
	}
	var r Ledger
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Unit(ref("c.v2")).Parts, parts) || r.Unit(ref("b1")).Parts != nil || r.Rows() != v2.Rows() || r.Check() != nil {
		t.Fatalf("round trip: %+v", r.Units)
	}
	for i := range b {
		var x Ledger
		if err := x.UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("truncated ledger of %d bytes decoded", i)
		}
	}
	var plain Ledger
	plain.Unit(ref("b1")).Add([]int64{1, 2})
	pb, _ := plain.MarshalBinary()
	if want := append([]byte(ledgerMagic), 1, 2, 'b', '1', 1, 2, 2); !bytes.Equal(pb, want) {
		t.Fatalf("a ledger without lineage: %q, want %q", pb, want)
	}
}
