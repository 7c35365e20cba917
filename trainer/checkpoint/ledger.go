package checkpoint

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sigdata/sig/warehouse/blockref"
)

// Run is Len consecutive event ids from Start.
type Run struct {
	Start, Len int64
}

// UnitLedger is what was trained from one work unit: a block at a
// version.
type UnitLedger struct {
	Unit blockref.Ref
	// Runs of event ids in training order.
	Runs []Run
	// Parts is the lineage of a compacted block's unit (issue 28): the
	// blocks, at the versions compacted, whose rows its version 1 holds.
	// Check counts them as versions of the compacted block: the same event
	// versions as its version 1, older ones than its later versions.
	Parts []blockref.Ref
}

// Rows is the number of event ids (with repeats).
func (u *UnitLedger) Rows() int64 {
	var n int64
	for _, r := range u.Runs {
		n += r.Len
	}
	return n
}

// Add appends ids (in training order).
func (u *UnitLedger) Add(ids []int64) {
	for _, id := range ids {
		if k := len(u.Runs); k > 0 && u.Runs[k-1].Start+u.Runs[k-1].Len == id {
			u.Runs[k-1].Len++
			continue
		}
		u.Runs = append(u.Runs, Run{Start: id, Len: 1})
	}
}

// IDs expands the runs.
func (u *UnitLedger) IDs() []int64 {
	out := make([]int64, 0, u.Rows())
	for _, r := range u.Runs {
		for i := int64(0); i < r.Len; i++ {
			out = append(out, r.Start+i)
		}
	}
	return out
}

// Ledger lists the event ids trained into a model, unit by unit.
type Ledger struct {
	Units []UnitLedger
	index map[blockref.Ref]int
}

// Unit returns the ledger of unit, adding it if absent.
func (l *Ledger) Unit(unit blockref.Ref) *UnitLedger {
	if l.index == nil {
		l.index = map[blockref.Ref]int{}
		for i, u := range l.Units {
			l.index[u.Unit] = i
		}
	}
	i, ok := l.index[unit]
	if !ok {
		i = len(l.Units)
		l.Units = append(l.Units, UnitLedger{Unit: unit})
		l.index[unit] = i
	}
	return &l.Units[i]
}

// Has reports whether unit is in the ledger.
func (l *Ledger) Has(unit blockref.Ref) bool {
	for _, u := range l.Units {
		if u.Unit == unit {
			return true
		}
	}
	return false
}

// Clone returns a deep copy.
func (l *Ledger) Clone() *Ledger {
	c := &Ledger{}
	for _, u := range l.Units {
		c.Units = append(c.Units, UnitLedger{Unit: u.Unit, Runs: slices.Clone(u.Runs), Parts: slices.Clone(u.Parts)})
	}
	return c
}

// Merge appends o's units (which must not be in l).
func (l *Ledger) Merge(o *Ledger) {
	for _, u := range o.Units {
		dst := l.Unit(u.Unit)
		dst.Runs = append(dst.Runs, u.Runs...)
		if dst.Parts == nil {
			dst.Parts = slices.Clone(u.Parts)
		}
	}
}

// Rows is the number of event ids in the ledger (with repeats).
func (l *Ledger) Rows() int64 {
	var n int64
	for i := range l.Units {
		n += l.Units[i].Rows()
	}
	return n
}

// ErrDuplicate reports an event id trained more than once.
var ErrDuplicate = errors.New("checkpoint: event trained more than once")

// Check returns ErrDuplicate (naming an id) if an event id occurs twice in
// one unit, or in units of two different blocks. Units are block
// versions: an event of a block that changed after it was trained (issue
// 21) is trained again in the unit of the block's new version, which is
// another event version, not a duplicate; within a version and across
// blocks every event is trained once.
//
// A compacted block (issue 28) and its parts are one block whose parts
// are older versions: the units of its parts at the versions compacted and
// the unit of its version 1 hold the same event versions, so an event
// occurs once among them all; its later versions are newer versions of
// every event in it. A unit's Parts say which blocks are whose parts.
func (l *Ledger) Check() error {
	// The lineages: part block id -> compacted block id, and the part
	// versions the compacted block's version 1 holds.
	into := map[string]string{}
	compacted := map[blockref.Ref]string{}
	for _, u := range l.Units {
		for _, p := range u.Parts {
			into[p.ID()] = u.Unit.ID()
			compacted[p] = u.Unit.ID()
		}
	}
	// A version class is a set of units holding the same event versions:
	// a unit alone, or a compacted block's version 1 with its parts'
	// units at the versions compacted.
	class := func(r blockref.Ref) blockref.Ref {
		if c, ok := compacted[r]; ok {
			return blockref.New(c, 1)
		}
		return r
	}
	classes := map[blockref.Ref][]Run{}
	blocks := map[string][]Run{} // block id -> the union of its versions' runs
	for _, u := range l.Units {
		runs := slices.Clone(u.Runs)
		if err := overlap(runs); err != nil {
			return fmt.Errorf("%w (unit %s)", err, u.Unit)
		}
		c := class(u.Unit)
		if err := overlap(append(slices.Clone(classes[c]), runs...)); err != nil {
			return fmt.Errorf("%w (unit %s and the same event versions in block %s's lineage)", err, u.Unit, c)
		}
		classes[c] = union(append(classes[c], runs...))
		id := u.Unit.ID()
		if c, ok := into[id]; ok {
			id = c
		}
		blocks[id] = union(append(blocks[id], runs...))
	}
	var all []Run
	for _, runs := range blocks {
		all = append(all, runs...)
	}
	return overlap(all)
}

// overlap sorts runs and returns ErrDuplicate naming the first id two of
// them share.
func overlap(runs []Run) error {
	slices.SortFunc(runs, func(a, b Run) int { return cmp.Compare(a.Start, b.Start) })
	for i := 1; i < len(runs); i++ {
		if p := runs[i-1]; runs[i].Start < p.Start+p.Len {
			return fmt.Errorf("%w: event %d", ErrDuplicate, runs[i].Start)
		}
	}
	return nil
}

// union returns the runs covering the ids of runs, sorted, none sharing an
// id.
func union(runs []Run) []Run {
	slices.SortFunc(runs, func(a, b Run) int { return cmp.Compare(a.Start, b.Start) })
	var out []Run
	for _, r := range runs {
		if k := len(out) - 1; k >= 0 && r.Start <= out[k].Start+out[k].Len {
			out[k].Len = max(out[k].Len, r.Start+r.Len-out[k].Start)
			continue
		}
		out = append(out, r)
	}
	return out
}

const (
	ledgerMagic = "SIGLEDGER1\n"
	// ledgerMagic2 is a ledger with a lineage: after each unit's runs,
	// its parts (issue 28). A ledger without any is written as before.
	ledgerMagic2 = "SIGLEDGER2\n"
)

// MarshalBinary encodes the ledger: magic, unit count, then per unit its
// name (as the warehouse names the block version, blockref.Ref.String), run
// count and runs (start delta-coded, zig-zag varints), and, when some unit
// is a compacted block's (magic SIGLEDGER2), its part count and parts'
// names.
func (l *Ledger) MarshalBinary() ([]byte, error) {
	lineage := slices.ContainsFunc(l.Units, func(u UnitLedger) bool { return len(u.Parts) > 0 })
	b := []byte(ledgerMagic)
	if lineage {
		b = []byte(ledgerMagic2)
	}
	name := func(r blockref.Ref) {
		s := r.String()
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(l.Units)))
	for _, u := range l.Units {
		name(u.Unit)
		b = binary.AppendUvarint(b, uint64(len(u.Runs)))
		var prev int64
		for _, r := range u.Runs {
			b = binary.AppendVarint(b, r.Start-prev)
			b = binary.AppendUvarint(b, uint64(r.Len))
			prev = r.Start
		}
		if lineage {
			b = binary.AppendUvarint(b, uint64(len(u.Parts)))
			for _, p := range u.Parts {
				name(p)
			}
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote.
func (l *Ledger) UnmarshalBinary(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("checkpoint: corrupt ledger: %s", what) }
	if len(b) < len(ledgerMagic) || string(b[:len(ledgerMagic)]) != ledgerMagic && string(b[:len(ledgerMagic2)]) != ledgerMagic2 {
		return bad("magic")
	}
	lineage := string(b[:len(ledgerMagic2)]) == ledgerMagic2
	b = b[len(ledgerMagic):]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	n, ok := uv()
	if !ok || n > uint64(len(b)) {
		return bad("unit count")
	}
	*l = Ledger{}
	for i := uint64(0); i < n; i++ {
		k, ok := uv()
		if !ok || k > uint64(len(b)) {
			return bad("unit name")
		}
		u := UnitLedger{Unit: blockref.Parse(string(b[:k]))}
		b = b[k:]
		runs, ok := uv()
		if !ok || runs > uint64(len(b)) {
			return bad("run count")
		}
		var prev int64
		for j := uint64(0); j < runs; j++ {
			d, m := binary.Varint(b)
			if m <= 0 {
				return bad("run start")
			}
			b = b[m:]
			ln, ok := uv()
			if !ok || ln > 1<<40 {
				return bad("run length")
			}
			prev += d
			u.Runs = append(u.Runs, Run{Start: prev, Len: int64(ln)})
		}
		if lineage {
			parts, ok := uv()
			if !ok || parts > uint64(len(b)) {
				return bad("part count")
			}
			for j := uint64(0); j < parts; j++ {
				k, ok := uv()
				if !ok || k > uint64(len(b)) {
					return bad("part name")
				}
				u.Parts = append(u.Parts, blockref.Parse(string(b[:k])))
				b = b[k:]
			}
		}
		l.Units = append(l.Units, u)
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return nil
}
