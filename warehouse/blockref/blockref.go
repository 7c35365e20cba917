package blockref

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// normalize is the one rule of unversioned names: a version below 1 (0 or
// absent in objects and records written before versions) is version 1.
func normalize(v int64) int64 {
	if v < 1 {
		return 1
	}
	return v
}

// Stored is version v as records written before versions hold it: absent
// (0) for version 1, v otherwise, so that a block (or memo block) that
// never changed is stored byte for byte as it always was. It is the
// inverse of New's rule: New(id, Stored(v)) == New(id, v).
func Stored(v int64) int64 {
	if normalize(v) == 1 {
		return 0
	}
	return v
}

// versioned is what Ref and Memo share: a block id and a version of at
// least 1, named as the warehouse names it. The two types embed it and
// stay distinct, so a raw version and an input version cannot be mixed.
type versioned struct {
	id string
	v  int64
}

func newVersioned(id string, v int64) versioned {
	if id == "" {
		return versioned{}
	}
	return versioned{id: id, v: normalize(v)}
}

// ID is the block's id.
func (n versioned) ID() string { return n.id }

// IsZero reports whether the value names no block.
func (n versioned) IsZero() bool { return n.id == "" }

// String is the warehouse's name: the id for version 1, "<id>.v<N>" for
// N >= 2 (raw/<source>/<name>.arrow, memo/<key>/<name>.arrow).
func (n versioned) String() string {
	if n.v < 2 {
		return n.id
	}
	return n.id + ".v" + strconv.FormatInt(n.v, 10)
}

// MarshalText writes String, so that a value in JSON is its name.
func (n versioned) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText reads a name written by MarshalText (as Parse does).
func (n *versioned) UnmarshalText(b []byte) error {
	*n = newVersioned(split(string(b)))
	return nil
}

// compare orders by block id, then version.
func (n versioned) compare(o versioned) int {
	if c := strings.Compare(n.id, o.id); c != 0 {
		return c
	}
	return cmp.Compare(n.v, o.v)
}

// Ref is one version of a raw block. The zero Ref names no block.
type Ref struct{ versioned }

// New is version v of block id (v < 1 means 1); the zero Ref if id is
// empty.
func New(id string, v int64) Ref { return Ref{newVersioned(id, v)} }

// Parse reads "<id>.v<N>" (N >= 2, canonical decimal) as version N of
// block id and anything else as version 1 of the block named s. It never
// fails: whether s is a valid block id is the caller's check at its edge
// (warehouse/block.ValidateName).
func Parse(s string) Ref { return Ref{newVersioned(split(s))} }

// Version is the block's version, at least 1 (0 only for the zero Ref).
func (r Ref) Version() int64 { return r.v }

// Memo is the memo entry's block of a component whose input version in
// this block version is inputVersion.
func (r Ref) Memo(inputVersion int64) Memo { return NewMemo(r.id, inputVersion) }

// Compare orders refs by block id, then version.
func (r Ref) Compare(o Ref) int { return r.compare(o.versioned) }

// Memo is a memo entry's block: a block id and the input version of the
// component's data in it (the version at which a column the component
// reads last changed). It is not a raw version: many raw versions share
// one input version. The zero Memo names no block.
type Memo struct{ versioned }

// NewMemo is block id at input version v (v < 1 means 1); the zero Memo
// if id is empty.
func NewMemo(id string, v int64) Memo { return Memo{newVersioned(id, v)} }

// ParseMemo reads a memo block name as Parse reads a Ref's.
func ParseMemo(s string) Memo { return Memo{newVersioned(split(s))} }

// InputVersion is the version of the block's data in the columns the
// component reads, at least 1 (0 only for the zero Memo).
func (m Memo) InputVersion() int64 { return m.v }

// Compare orders memo blocks by block id, then input version.
func (m Memo) Compare(o Memo) int { return m.compare(o.versioned) }

// GoString shows which kind a value is in test failures.
func (r Ref) GoString() string  { return fmt.Sprintf("blockref.New(%q, %d)", r.id, r.v) }
func (m Memo) GoString() string { return fmt.Sprintf("blockref.NewMemo(%q, %d)", m.id, m.v) }

// maxDigits bounds a version's digits so that it fits an int64 without
// overflow checks (a 19-digit suffix is part of a version-1 name).
const maxDigits = 18

// split reads "<id>.v<N>" for N >= 2 written in canonical decimal (no sign,
// no leading zero, at most maxDigits digits); anything else is version 1
// of the block named s.
func split(s string) (string, int64) {
	i := strings.LastIndex(s, ".v")
	if i <= 0 {
		return s, normalize(0)
	}
	digits := s[i+2:]
	if digits == "" || len(digits) > maxDigits || digits[0] == '0' {
		return s, normalize(0)
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return s, normalize(0)
		}
	}
	n, _ := strconv.ParseInt(digits, 10, 64)
	if n < 2 {
		return s, normalize(0)
	}
	return s[:i], n
}
