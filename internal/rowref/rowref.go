package rowref

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/cespare/xxhash/v2"
)

// Type is a column type. It mirrors transform.Type without importing it
// (transform's tests import this package).
type Type uint8

// Column types.
const (
	Invalid Type = iota
	String
	Int64
	Float64
	ListString
	ListInt64
)

func (t Type) String() string {
	return [...]string{"invalid", "string", "int64", "float64", "list<string>", "list<int64>"}[t]
}

// IsList reports whether t is a list type.
func (t Type) IsList() bool { return t == ListString || t == ListInt64 }

// Column is a nullable column of one type; only the slice of its type is set.
type Column struct {
	Type Type
	// Null[i] reports that row i is null. Nil means no row is. The value
	// slot of a null row is ignored.
	Null []bool
	Str  []string
	I64  []int64
	F64  []float64
	LStr [][]string
	LI64 [][]int64
	// ElemNull marks null elements inside list rows: ElemNull[i][j] for
	// element j of row i. Nil (or a nil row) when there are none. Every op
	// drops null elements before it looks at a list.
	ElemNull [][]bool
}

// Len returns the number of rows.
func (c *Column) Len() int {
	switch c.Type {
	case String:
		return len(c.Str)
	case Int64:
		return len(c.I64)
	case Float64:
		return len(c.F64)
	case ListString:
		return len(c.LStr)
	case ListInt64:
		return len(c.LI64)
	}
	return 0
}

// IsNull reports whether row i is null.
func (c *Column) IsNull(i int) bool { return c.Null != nil && c.Null[i] }

// StrRow returns the non-null elements of list<string> row i (nil for a
// null row). The result aliases the column when the row has no null
// elements.
func (c *Column) StrRow(i int) []string {
	if c.IsNull(i) {
		return nil
	}
	return nonNull(c, i, c.LStr[i])
}

// IntRow is StrRow for list<int64>.
func (c *Column) IntRow(i int) []int64 {
	if c.IsNull(i) {
		return nil
	}
	return nonNull(c, i, c.LI64[i])
}

// nonNull is the elements of row, list row i of c, that are not null: row
// itself when none is.
func nonNull[T any](c *Column, i int, row []T) []T {
	if c.ElemNull == nil || c.ElemNull[i] == nil {
		return row
	}
	out := make([]T, 0, len(row))
	for j, v := range row {
		if !c.ElemNull[i][j] {
			out = append(out, v)
		}
	}
	return out
}

// --- string normalization ---

// LowerString is lower() of one string: strings.ToLower, which maps every
// code point with unicode.ToLower and every invalid UTF-8 byte to U+FFFD.
func LowerString(s string) string { return strings.ToLower(s) }

// StripPunctString is strip_punct() of one string: code points of category P
// deleted, invalid UTF-8 bytes mapped to U+FFFD (strings.Map does that).
func StripPunctString(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsPunct(r) {
			return -1
		}
		return r
	}, s)
}

func mapStrings(c Column, f func(string) string) Column {
	n := c.Len()
	out := Column{Type: c.Type, Null: c.Null}
	if c.Type == String {
		out.Str = make([]string, n)
		for i, s := range c.Str {
			if !c.IsNull(i) {
				out.Str[i] = f(s)
			}
		}
		return out
	}
	out.LStr = make([][]string, n)
	for i := range c.LStr {
		row := c.StrRow(i)
		if row == nil {
			continue
		}
		o := make([]string, len(row))
		for j, s := range row {
			o[j] = f(s)
		}
		out.LStr[i] = o
	}
	return out
}

// Lower is lower() on a string or list<string> column.
func Lower(c Column) Column { return mapStrings(c, LowerString) }

// StripPunct is strip_punct() on a string or list<string> column.
func StripPunct(c Column) Column { return mapStrings(c, StripPunctString) }

// --- tokenization ---

// Tokens is unigrams() of one string: strings.Fields.
func Tokens(s string) []string { return strings.Fields(s) }

// NgramsOf is ngrams() of one string.
func NgramsOf(s string, n int) []string {
	toks := strings.Fields(s)
	if len(toks) < n {
		return []string{}
	}
	out := make([]string, 0, len(toks)-n+1)
	for t := 0; t+n <= len(toks); t++ {
		out = append(out, strings.Join(toks[t:t+n], " "))
	}
	return out
}

// Unigrams is unigrams() on a string column.
func Unigrams(c Column) Column {
	out := Column{Type: ListString, Null: c.Null, LStr: make([][]string, len(c.Str))}
	for i, s := range c.Str {
		if !c.IsNull(i) {
			out.LStr[i] = Tokens(s)
		}
	}
	return out
}

// Ngrams is ngrams(n) on a string column.
func Ngrams(c Column, n int) Column {
	out := Column{Type: ListString, Null: c.Null, LStr: make([][]string, len(c.Str))}
	for i, s := range c.Str {
		if !c.IsNull(i) {
			out.LStr[i] = NgramsOf(s, n)
		}
	}
	return out
}

// --- list and set ops ---

// strElems appends the string elements of row i of c, a string or
// list<string> column: a scalar is a one-element list, null is empty.
func strElems(dst []string, c *Column, i int) []string {
	if c.IsNull(i) {
		return dst
	}
	if c.Type == String {
		return append(dst, c.Str[i])
	}
	return append(dst, c.StrRow(i)...)
}

func intElems(dst []int64, c *Column, i int) []int64 {
	if c.IsNull(i) {
		return dst
	}
	if c.Type == Int64 {
		return append(dst, c.I64[i])
	}
	return append(dst, c.IntRow(i)...)
}

func isText(c *Column) bool { return c.Type == String || c.Type == ListString }

func sortedSet[T string | int64](s []T) []T {
	slices.Sort(s)
	return slices.Compact(s)
}

// Union is union(a, b, ...): per row, the values in any argument, sorted and
// unique. Never null.
func Union(cs ...Column) Column {
	n := cs[0].Len()
	if isText(&cs[0]) {
		out := Column{Type: ListString, LStr: make([][]string, n)}
		for i := 0; i < n; i++ {
			var row []string
			for k := range cs {
				row = strElems(row, &cs[k], i)
			}
			out.LStr[i] = sortedSet(row)
		}
		return out
	}
	out := Column{Type: ListInt64, LI64: make([][]int64, n)}
	for i := 0; i < n; i++ {
		var row []int64
		for k := range cs {
			row = intElems(row, &cs[k], i)
		}
		out.LI64[i] = sortedSet(row)
	}
	return out
}

// Intersect is intersect(a, b, ...): per row, the values of the first
// argument found in every other, sorted and unique. Never null.
func Intersect(cs ...Column) Column {
	n := cs[0].Len()
	if isText(&cs[0]) {
		out := Column{Type: ListString, LStr: make([][]string, n)}
		others := make([][]string, len(cs)-1)
		for i := 0; i < n; i++ {
			for k := 1; k < len(cs); k++ {
				others[k-1] = sortedSet(strElems(nil, &cs[k], i))
			}
			row := []string{}
			for _, x := range sortedSet(strElems(nil, &cs[0], i)) {
				in := true
				for _, o := range others {
					j := sort.SearchStrings(o, x)
					in = in && j < len(o) && o[j] == x
				}
				if in {
					row = append(row, x)
				}
			}
			out.LStr[i] = row
		}
		return out
	}
	out := Column{Type: ListInt64, LI64: make([][]int64, n)}
	others := make([][]int64, len(cs)-1)
	for i := 0; i < n; i++ {
		for k := 1; k < len(cs); k++ {
			others[k-1] = sortedSet(intElems(nil, &cs[k], i))
		}
		row := []int64{}
		for _, x := range sortedSet(intElems(nil, &cs[0], i)) {
			in := true
			for _, o := range others {
				_, found := slices.BinarySearch(o, x)
				in = in && found
			}
			if in {
				row = append(row, x)
			}
		}
		out.LI64[i] = row
	}
	return out
}

// Concat is concat(a, b, ...): per row, the elements of every argument in
// argument order, duplicates kept. Never null.
func Concat(cs ...Column) Column {
	n := cs[0].Len()
	if isText(&cs[0]) {
		out := Column{Type: ListString, LStr: make([][]string, n)}
		for i := 0; i < n; i++ {
			size := 0
			for k := range cs {
				if cs[k].Type == ListString && !cs[k].IsNull(i) {
					size += len(cs[k].LStr[i])
				} else {
					size++
				}
			}
			row := make([]string, 0, size)
			for k := range cs {
				row = strElems(row, &cs[k], i)
			}
			out.LStr[i] = row
		}
		return out
	}
	out := Column{Type: ListInt64, LI64: make([][]int64, n)}
	for i := 0; i < n; i++ {
		var row []int64
		for k := range cs {
			row = intElems(row, &cs[k], i)
		}
		out.LI64[i] = row
	}
	return out
}

// Dedupe is dedupe(l): the distinct values of each row, sorted. null -> [].
func Dedupe(c Column) Column {
	n := c.Len()
	if c.Type == ListString {
		out := Column{Type: ListString, LStr: make([][]string, n)}
		for i := 0; i < n; i++ {
			out.LStr[i] = sortedSet(slices.Clone(c.StrRow(i)))
		}
		return out
	}
	out := Column{Type: ListInt64, LI64: make([][]int64, n)}
	for i := 0; i < n; i++ {
		out.LI64[i] = sortedSet(slices.Clone(c.IntRow(i)))
	}
	return out
}

// Truncate is truncate(l, max): the first max elements of each row.
func Truncate(c Column, max int) Column {
	n := c.Len()
	out := Column{Type: c.Type, Null: c.Null}
	if c.Type == ListString {
		out.LStr = make([][]string, n)
		for i := 0; i < n; i++ {
			row := c.StrRow(i)
			if len(row) > max {
				row = row[:max]
			}
			out.LStr[i] = row
		}
		return out
	}
	out.LI64 = make([][]int64, n)
	for i := 0; i < n; i++ {
		row := c.IntRow(i)
		if len(row) > max {
			row = row[:max]
		}
		out.LI64[i] = row
	}
	return out
}

// Length is length(l): the number of non-null elements. null -> 0.
func Length(c Column) Column {
	n := c.Len()
	out := Column{Type: Int64, I64: make([]int64, n)}
	for i := 0; i < n; i++ {
		if c.Type == ListString {
			out.I64[i] = int64(len(c.StrRow(i)))
		} else {
			out.I64[i] = int64(len(c.IntRow(i)))
		}
	}
	return out
}

// --- hashing ---

// The constants of the stable hash, written out again from the
// documentation rather than shared with the kernels.
const (
	goldenGamma = 0x9E3779B97F4A7C15
	murmurC1    = 0xff51afd7ed558ccd
	murmurC2    = 0xc4ceb9fe1a85ec53
	// MaxCrossPairs is the documented limit of pairs per row in cross().
	MaxCrossPairs = 65536
)

// Fmix64 is MurmurHash3's 64-bit finalizer.
func Fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= murmurC1
	k ^= k >> 33
	k *= murmurC2
	k ^= k >> 33
	return k
}

// HashString is h(s) = XXH64 of the UTF-8 bytes, seed 0.
func HashString(s string) uint64 { return xxhash.Sum64String(s) }

// HashInt is h(v) = XXH64 of the 8 little-endian bytes of v, seed 0.
func HashInt(v int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	return xxhash.Sum64(b[:])
}

// BucketOf is hash(): fmix64(h + salt*golden) mod buckets.
func BucketOf(h uint64, salt, buckets int64) int64 {
	return int64(Fmix64(h+uint64(salt)*goldenGamma) % uint64(buckets))
}

// CrossOf is one cross() value: fmix64(h(x)*golden + h(y)) mod buckets.
func CrossOf(hx, hy uint64, buckets int64) int64 {
	return int64(Fmix64(hx*goldenGamma+hy) % uint64(buckets))
}

// Hash is hash(x, buckets, salt): scalar, or elementwise on lists.
func Hash(c Column, buckets, salt int64) Column {
	n := c.Len()
	switch c.Type {
	case String:
		out := Column{Type: Int64, Null: c.Null, I64: make([]int64, n)}
		for i, s := range c.Str {
			if !c.IsNull(i) {
				out.I64[i] = BucketOf(HashString(s), salt, buckets)
			}
		}
		return out
	case Int64:
		out := Column{Type: Int64, Null: c.Null, I64: make([]int64, n)}
		for i, v := range c.I64 {
			if !c.IsNull(i) {
				out.I64[i] = BucketOf(HashInt(v), salt, buckets)
			}
		}
		return out
	}
	out := Column{Type: ListInt64, Null: c.Null, LI64: make([][]int64, n)}
	for i := 0; i < n; i++ {
		if c.IsNull(i) {
			continue
		}
		var row []int64
		if c.Type == ListString {
			for _, s := range c.StrRow(i) {
				row = append(row, BucketOf(HashString(s), salt, buckets))
			}
		} else {
			for _, v := range c.IntRow(i) {
				row = append(row, BucketOf(HashInt(v), salt, buckets))
			}
		}
		out.LI64[i] = row
	}
	return out
}

func hashes(c *Column, i int) []uint64 {
	var hs []uint64
	if isText(c) {
		for _, s := range strElems(nil, c, i) {
			hs = append(hs, HashString(s))
		}
		return hs
	}
	for _, v := range intElems(nil, c, i) {
		hs = append(hs, HashInt(v))
	}
	return hs
}

// Cross is cross(a, b, buckets): per row, every pair (x of a, y of b),
// a-major. It fails on a row with more than MaxCrossPairs pairs.
func Cross(a, b Column, buckets int64) (Column, error) {
	n := a.Len()
	out := Column{Type: ListInt64, LI64: make([][]int64, n)}
	for i := 0; i < n; i++ {
		ha, hb := hashes(&a, i), hashes(&b, i)
		if len(ha)*len(hb) > MaxCrossPairs {
			return Column{}, fmt.Errorf("cross: row %d has %d x %d pairs, more than the limit of %d", i, len(ha), len(hb), MaxCrossPairs)
		}
		row := make([]int64, 0, len(ha)*len(hb))
		for _, x := range ha {
			for _, y := range hb {
				row = append(row, CrossOf(x, y, buckets))
			}
		}
		out.LI64[i] = row
	}
	return out, nil
}

// --- numeric ---

func asFloat(c *Column, i int) float64 {
	if c.Type == Int64 {
		return float64(c.I64[i])
	}
	return c.F64[i]
}

// BucketizeOf is bucketize() of one value: how many boundaries are <= x.
func BucketizeOf(x float64, bounds []float64) int64 {
	return int64(sort.Search(len(bounds), func(k int) bool { return bounds[k] > x }))
}

// Bucketize is bucketize(x, boundaries). null and NaN -> null.
func Bucketize(c Column, bounds []float64) Column {
	n := c.Len()
	out := Column{Type: Int64, I64: make([]int64, n), Null: make([]bool, n)}
	for i := 0; i < n; i++ {
		if c.IsNull(i) || math.IsNaN(asFloat(&c, i)) {
			out.Null[i] = true
			continue
		}
		out.I64[i] = BucketizeOf(asFloat(&c, i), bounds)
	}
	return out
}

// Log1p is log1p(x) = math.Log1p(float64(x)).
func Log1p(c Column) Column {
	n := c.Len()
	out := Column{Type: Float64, Null: c.Null, F64: make([]float64, n)}
	for i := 0; i < n; i++ {
		if !c.IsNull(i) {
			out.F64[i] = math.Log1p(asFloat(&c, i))
		}
	}
	return out
}

// ClipFloat is clip() of one float64: a NaN is returned unchanged (same
// bits); otherwise min(max(x, lo), hi) as math.Max and math.Min compute it
// (+0 is above -0).
func ClipFloat(x, lo, hi float64) float64 {
	if math.IsNaN(x) {
		return x
	}
	return math.Min(math.Max(x, lo), hi)
}

// ClipIntBounds are the int64 bounds of clip(lo, hi): ceil(lo) and
// floor(hi), saturated to the int64 range.
func ClipIntBounds(lo, hi float64) (int64, int64) {
	sat := func(f float64) int64 {
		switch {
		case f >= 9223372036854775807.0: // 2^63 as a float64
			return math.MaxInt64
		case f <= -9223372036854775808.0:
			return math.MinInt64
		}
		return int64(f)
	}
	return sat(math.Ceil(lo)), sat(math.Floor(hi))
}

// Clip is clip(x, lo, hi).
func Clip(c Column, lo, hi float64) Column {
	n := c.Len()
	if c.Type == Int64 {
		ilo, ihi := ClipIntBounds(lo, hi)
		out := Column{Type: Int64, Null: c.Null, I64: make([]int64, n)}
		for i, x := range c.I64 {
			if c.IsNull(i) {
				continue
			}
			if x < ilo {
				x = ilo
			}
			if x > ihi {
				x = ihi
			}
			out.I64[i] = x
		}
		return out
	}
	out := Column{Type: Float64, Null: c.Null, F64: make([]float64, n)}
	for i, x := range c.F64 {
		if !c.IsNull(i) {
			out.F64[i] = ClipFloat(x, lo, hi)
		}
	}
	return out
}

// FillMissing is fill_missing(x, default): def must be a string, an int64
// or a float64 matching the column's type. Never null.
func FillMissing(c Column, def any) Column {
	out := Column{Type: c.Type}
	switch c.Type {
	case String:
		out.Str = fill(&c, c.Str, def.(string))
	case Int64:
		out.I64 = fill(&c, c.I64, def.(int64))
	case Float64:
		out.F64 = fill(&c, c.F64, def.(float64))
	}
	return out
}

// fill is c's values with def in place of each null.
func fill[T any](c *Column, vals []T, def T) []T {
	out := make([]T, len(vals))
	for i, v := range vals {
		if c.IsNull(i) {
			v = def
		}
		out[i] = v
	}
	return out
}
