package transform

import (
	"fmt"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow"
)

// Kernel computes an op over whole columns: in are the op's input arrays
// (all of the same length), n the checked node carrying the parameters.
type Kernel func(in []arrow.Array, n *Node) (arrow.Array, error)

func intParam(n *Node, name string) int64 {
	v, _ := n.Param(name)
	return v.Int
}

func floatParam(n *Node, name string) float64 {
	v, _ := n.Param(name)
	return v.Float
}

// --- string normalization ---

var asciiPunct, asciiSpace [128]bool

func init() {
	for c := 0; c < 128; c++ {
		asciiPunct[c] = unicode.IsPunct(rune(c))
		asciiSpace[c] = unicode.IsSpace(rune(c))
	}
}

var runeErrorBytes = []byte(string(utf8.RuneError))

// appendLower appends lower(src) to dst (see the lower op's doc).
func appendLower(dst, src []byte) []byte {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, runeErrorBytes...)
		} else {
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
		}
		i += size
	}
	return dst
}

// appendStripPunct appends strip_punct(src) to dst.
func appendStripPunct(dst, src []byte) []byte {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			if !asciiPunct[c] {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, runeErrorBytes...)
		case unicode.IsPunct(r):
		default:
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst
}

// mapStrings applies f to every string of a string or list<string> column.
func mapStrings(a arrow.Array, f func(dst, src []byte) []byte) arrow.Array {
	if a.DataType().ID() == arrow.STRING {
		c := viewStr(a)
		b := newStrBuilder(c.n, int(c.offs[c.n]-c.offs[0])+16)
		for i := 0; i < c.n; i++ {
			if c.valid.null(i) {
				b.appendNull()
				continue
			}
			b.data = f(b.data, c.at(i))
			b.end()
		}
		return b.finish()
	}
	l := viewList(a)
	c := &l.str
	b := newListStrBuilder(l.n, int(c.offs[l.offs[l.n]]-c.offs[l.offs[0]])+16)
	for i := 0; i < l.n; i++ {
		if l.valid.null(i) {
			b.appendNull()
			continue
		}
		for j := l.offs[i]; j < l.offs[i+1]; j++ {
			b.child.data = f(b.child.data, c.at(int(j)))
			b.child.end()
		}
		b.endRow()
	}
	return b.finish()
}

func kernelLower(in []arrow.Array, _ *Node) (arrow.Array, error) {
	return mapStrings(in[0], appendLower), nil
}

func kernelStripPunct(in []arrow.Array, _ *Node) (arrow.Array, error) {
	return mapStrings(in[0], appendStripPunct), nil
}

// --- tokenization ---

// nextToken returns the bounds of the first token of s at or after i, or
// start == len(s) when there is none. Tokens are maximal runs of code points
// that are not unicode.IsSpace; invalid UTF-8 bytes are not space.
func nextToken(s []byte, i int) (start, end int) {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if !asciiSpace[c] {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	start = i
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiSpace[c] {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if unicode.IsSpace(r) {
			break
		}
		i += size
	}
	return start, i
}

func kernelUnigrams(in []arrow.Array, _ *Node) (arrow.Array, error) {
	c := viewStr(in[0])
	b := newListStrBuilder(c.n, int(c.offs[c.n]-c.offs[0]))
	for i := 0; i < c.n; i++ {
		if c.valid.null(i) {
			b.appendNull()
			continue
		}
		s := c.at(i)
		for k := 0; ; {
			st, en := nextToken(s, k)
			if st == len(s) {
				break
			}
			b.elem(s[st:en])
			k = en
		}
		b.endRow()
	}
	return b.finish(), nil
}

func kernelNgrams(in []arrow.Array, nd *Node) (arrow.Array, error) {
	n := int(intParam(nd, "n"))
	c := viewStr(in[0])
	b := newListStrBuilder(c.n, int(c.offs[c.n]-c.offs[0])*n)
	var toks [][2]int
	for i := 0; i < c.n; i++ {
		if c.valid.null(i) {
			b.appendNull()
			continue
		}
		s := c.at(i)
		toks = toks[:0]
		for k := 0; ; {
			st, en := nextToken(s, k)
			if st == len(s) {
				break
			}
			toks = append(toks, [2]int{st, en})
			k = en
		}
		for t := 0; t+n <= len(toks); t++ {
			for k := 0; k < n; k++ {
				if k > 0 {
					b.child.data = append(b.child.data, ' ')
				}
				tk := toks[t+k]
				b.child.data = append(b.child.data, s[tk[0]:tk[1]]...)
			}
			b.child.end()
		}
		b.endRow()
	}
	return b.finish(), nil
}

// --- list and set ops ---

// operand is one input of a set op or concat: a scalar or a list column,
// string or int64.
type operand struct {
	list   bool
	l      listView
	s      strCol
	i      i64Col
	isText bool
}

func operands(in []arrow.Array) []operand {
	ops := make([]operand, len(in))
	for k, a := range in {
		switch a.DataType().ID() {
		case arrow.LIST:
			ops[k] = operand{list: true, l: viewList(a), isText: a.DataType().(*arrow.ListType).Elem().ID() == arrow.STRING}
		case arrow.STRING:
			ops[k] = operand{s: viewStr(a), isText: true}
		default:
			ops[k] = operand{i: viewI64(a)}
		}
	}
	return ops
}

// appendStrs appends the string elements of row i of o to dst.
func (o *operand) appendStrs(dst []string, i int) []string {
	if o.list {
		if o.l.valid.null(i) {
			return dst
		}
		for j := o.l.offs[i]; j < o.l.offs[i+1]; j++ {
			dst = append(dst, o.l.str.str(int(j)))
		}
		return dst
	}
	if o.s.valid.null(i) {
		return dst
	}
	return append(dst, o.s.str(i))
}

func (o *operand) appendInts(dst []int64, i int) []int64 {
	if o.list {
		if o.l.valid.null(i) {
			return dst
		}
		return append(dst, o.l.i64.vals[o.l.offs[i]:o.l.offs[i+1]]...)
	}
	if o.i.valid.null(i) {
		return dst
	}
	return append(dst, o.i.vals[i])
}

// sortUnique sorts s and removes duplicates in place. Rows are short, so
// insertion sort beats the general sort below a few dozen elements.
func sortUnique[T string | int64](s []T) []T {
	if len(s) < 2 {
		return s
	}
	if len(s) <= 24 {
		for i := 1; i < len(s); i++ {
			for j := i; j > 0 && s[j] < s[j-1]; j-- {
				s[j], s[j-1] = s[j-1], s[j]
			}
		}
	} else {
		slices.Sort(s)
	}
	w := 1
	for r := 1; r < len(s); r++ {
		if s[r] != s[w-1] {
			s[w] = s[r]
			w++
		}
	}
	return s[:w]
}

// intersectSorted keeps the elements of a (sorted, unique) that are in b
// (sorted, unique), in place.
func intersectSorted[T string | int64](a, b []T) []T {
	w, j := 0, 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) {
			break
		}
		if b[j] == x {
			a[w] = x
			w++
		}
	}
	return a[:w]
}

func lengthHint(ops []operand) int {
	h := 0
	for _, o := range ops {
		if o.list && o.isText {
			h += len(o.l.str.data)
		} else if !o.list && o.isText {
			h += len(o.s.data)
		}
	}
	return h
}

func rows(in []arrow.Array) int { return in[0].Len() }

type setKind int

const (
	setUnion setKind = iota
	setIntersect
	setConcat
)

func setKernel(kind setKind) Kernel {
	return func(in []arrow.Array, _ *Node) (arrow.Array, error) {
		ops := operands(in)
		n := rows(in)
		if ops[0].isText {
			b := newListStrBuilder(n, lengthHint(ops))
			var acc, tmp []string
			for i := 0; i < n; i++ {
				acc = acc[:0]
				switch kind {
				case setConcat, setUnion:
					for k := range ops {
						acc = ops[k].appendStrs(acc, i)
					}
					if kind == setUnion {
						acc = sortUnique(acc)
					}
				case setIntersect:
					acc = sortUnique(ops[0].appendStrs(acc, i))
					for k := 1; k < len(ops) && len(acc) > 0; k++ {
						tmp = sortUnique(ops[k].appendStrs(tmp[:0], i))
						acc = intersectSorted(acc, tmp)
					}
				}
				for _, s := range acc {
					b.child.data = append(b.child.data, s...)
					b.child.end()
				}
				b.endRow()
			}
			return b.finish(), nil
		}
		b := newListI64Builder(n, n)
		var acc, tmp []int64
		for i := 0; i < n; i++ {
			acc = acc[:0]
			switch kind {
			case setConcat, setUnion:
				for k := range ops {
					acc = ops[k].appendInts(acc, i)
				}
				if kind == setUnion {
					acc = sortUnique(acc)
				}
			case setIntersect:
				acc = sortUnique(ops[0].appendInts(acc, i))
				for k := 1; k < len(ops) && len(acc) > 0; k++ {
					tmp = sortUnique(ops[k].appendInts(tmp[:0], i))
					acc = intersectSorted(acc, tmp)
				}
			}
			b.vals = append(b.vals, acc...)
			b.endRow()
		}
		return b.finish(), nil
	}
}

var (
	kernelUnion     = setKernel(setUnion)
	kernelIntersect = setKernel(setIntersect)
	kernelConcat    = setKernel(setConcat)
	kernelDedupe    = setKernel(setUnion) // dedupe(l) == union(l)
)

func kernelTruncate(in []arrow.Array, nd *Node) (arrow.Array, error) {
	max := int32(intParam(nd, "max"))
	l := viewList(in[0])
	if in[0].DataType().(*arrow.ListType).Elem().ID() == arrow.STRING {
		b := newListStrBuilder(l.n, len(l.str.data))
		for i := 0; i < l.n; i++ {
			if l.valid.null(i) {
				b.appendNull()
				continue
			}
			end := min(l.offs[i+1], l.offs[i]+max)
			for j := l.offs[i]; j < end; j++ {
				b.elem(l.str.at(int(j)))
			}
			b.endRow()
		}
		return b.finish(), nil
	}
	b := newListI64Builder(l.n, len(l.i64.vals))
	for i := 0; i < l.n; i++ {
		if l.valid.null(i) {
			b.appendNull()
			continue
		}
		end := min(l.offs[i+1], l.offs[i]+max)
		b.vals = append(b.vals, l.i64.vals[l.offs[i]:end]...)
		b.endRow()
	}
	return b.finish(), nil
}

func kernelLength(in []arrow.Array, _ *Node) (arrow.Array, error) {
	l := viewList(in[0])
	b := newI64Builder(l.n)
	for i := 0; i < l.n; i++ {
		if l.valid.null(i) {
			b.append(0)
			continue
		}
		b.append(int64(l.offs[i+1] - l.offs[i]))
	}
	return b.finish(), nil
}

// --- hashing ---

func kernelHash(in []arrow.Array, nd *Node) (arrow.Array, error) {
	buckets, salt := intParam(nd, "buckets"), intParam(nd, "salt")
	a := in[0]
	switch a.DataType().ID() {
	case arrow.STRING:
		c := viewStr(a)
		b := newI64Builder(c.n)
		for i := 0; i < c.n; i++ {
			if c.valid.null(i) {
				b.appendNull()
				continue
			}
			b.append(Bucket(HashBytes(c.at(i)), salt, buckets))
		}
		return b.finish(), nil
	case arrow.INT64:
		c := viewI64(a)
		b := newI64Builder(len(c.vals))
		for i, v := range c.vals {
			if c.valid.null(i) {
				b.appendNull()
				continue
			}
			b.append(Bucket(HashInt64(v), salt, buckets))
		}
		return b.finish(), nil
	}
	l := viewList(a)
	text := a.DataType().(*arrow.ListType).Elem().ID() == arrow.STRING
	b := newListI64Builder(l.n, int(l.offs[l.n]-l.offs[0]))
	for i := 0; i < l.n; i++ {
		if l.valid.null(i) {
			b.appendNull()
			continue
		}
		for j := l.offs[i]; j < l.offs[i+1]; j++ {
			var h uint64
			if text {
				h = HashBytes(l.str.at(int(j)))
			} else {
				h = HashInt64(l.i64.vals[j])
			}
			b.elem(Bucket(h, salt, buckets))
		}
		b.endRow()
	}
	return b.finish(), nil
}

// MaxCrossPairs bounds the output of cross() per row.
const MaxCrossPairs = 1 << 16

func (o *operand) appendHashes(dst []uint64, i int) []uint64 {
	if o.list {
		if o.l.valid.null(i) {
			return dst
		}
		for j := o.l.offs[i]; j < o.l.offs[i+1]; j++ {
			if o.isText {
				dst = append(dst, HashBytes(o.l.str.at(int(j))))
			} else {
				dst = append(dst, HashInt64(o.l.i64.vals[j]))
			}
		}
		return dst
	}
	if o.isText {
		if o.s.valid.null(i) {
			return dst
		}
		return append(dst, HashBytes(o.s.at(i)))
	}
	if o.i.valid.null(i) {
		return dst
	}
	return append(dst, HashInt64(o.i.vals[i]))
}

func kernelCross(in []arrow.Array, nd *Node) (arrow.Array, error) {
	buckets := intParam(nd, "buckets")
	ops := operands(in)
	n := rows(in)
	b := newListI64Builder(n, n)
	var ha, hb []uint64
	for i := 0; i < n; i++ {
		ha = ops[0].appendHashes(ha[:0], i)
		hb = ops[1].appendHashes(hb[:0], i)
		if len(ha)*len(hb) > MaxCrossPairs {
			return nil, fmt.Errorf("cross: row %d has %d x %d pairs, more than the limit of %d", i, len(ha), len(hb), MaxCrossPairs)
		}
		for _, x := range ha {
			for _, y := range hb {
				b.elem(CrossBucket(x, y, buckets))
			}
		}
		b.endRow()
	}
	return b.finish(), nil
}

// --- numeric ---

// numeric reads an int64 or float64 column as float64 values.
type numeric struct {
	f     []float64
	i     []int64
	valid bitmap
}

func viewNumeric(a arrow.Array) numeric {
	if a.DataType().ID() == arrow.INT64 {
		c := viewI64(a)
		return numeric{i: c.vals, valid: c.valid}
	}
	c := viewF64(a)
	return numeric{f: c.vals, valid: c.valid}
}

func (v *numeric) len() int {
	if v.i != nil || v.f == nil {
		return len(v.i)
	}
	return len(v.f)
}

func (v *numeric) at(i int) float64 {
	if v.f != nil {
		return v.f[i]
	}
	return float64(v.i[i])
}

func kernelBucketize(in []arrow.Array, nd *Node) (arrow.Array, error) {
	bounds, _ := nd.Param("boundaries")
	bs := bounds.Floats
	v := viewNumeric(in[0])
	n := in[0].Len()
	b := newI64Builder(n)
	for i := 0; i < n; i++ {
		x := v.at(i)
		if v.valid.null(i) || math.IsNaN(x) {
			b.appendNull()
			continue
		}
		// Number of boundaries <= x (upper bound), by binary search.
		lo, hi := 0, len(bs)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if bs[m] <= x {
				lo = m + 1
			} else {
				hi = m
			}
		}
		b.append(int64(lo))
	}
	return b.finish(), nil
}

func kernelLog1p(in []arrow.Array, _ *Node) (arrow.Array, error) {
	v := viewNumeric(in[0])
	n := in[0].Len()
	b := newF64Builder(n)
	for i := 0; i < n; i++ {
		if v.valid.null(i) {
			b.appendNull()
			continue
		}
		b.append(math.Log1p(v.at(i)))
	}
	return b.finish(), nil
}

// ClipInt64Bounds returns the int64 bounds clip() uses for int64 input.
func ClipInt64Bounds(lo, hi float64) (int64, int64) {
	return satInt64(math.Ceil(lo)), satInt64(math.Floor(hi))
}

func satInt64(f float64) int64 {
	if f <= math.MinInt64 {
		return math.MinInt64
	}
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(f)
}

func kernelClip(in []arrow.Array, nd *Node) (arrow.Array, error) {
	lo, hi := floatParam(nd, "lo"), floatParam(nd, "hi")
	if in[0].DataType().ID() == arrow.INT64 {
		c := viewI64(in[0])
		ilo, ihi := ClipInt64Bounds(lo, hi)
		b := newI64Builder(len(c.vals))
		for i, x := range c.vals {
			if c.valid.null(i) {
				b.appendNull()
				continue
			}
			b.append(min(max(x, ilo), ihi))
		}
		return b.finish(), nil
	}
	c := viewF64(in[0])
	b := newF64Builder(len(c.vals))
	for i, x := range c.vals {
		if c.valid.null(i) {
			b.appendNull()
			continue
		}
		if !math.IsNaN(x) {
			x = math.Min(math.Max(x, lo), hi)
		}
		b.append(x)
	}
	return b.finish(), nil
}

func kernelFillMissing(in []arrow.Array, nd *Node) (arrow.Array, error) {
	def, _ := nd.Param("default")
	a := in[0]
	switch a.DataType().ID() {
	case arrow.STRING:
		c := viewStr(a)
		b := newStrBuilder(c.n, len(c.data))
		d := []byte(def.Str)
		for i := 0; i < c.n; i++ {
			if c.valid.null(i) {
				b.append(d)
			} else {
				b.append(c.at(i))
			}
		}
		return b.finish(), nil
	case arrow.INT64:
		c := viewI64(a)
		b := newI64Builder(len(c.vals))
		for i, x := range c.vals {
			if c.valid.null(i) {
				x = def.Int
			}
			b.append(x)
		}
		return b.finish(), nil
	}
	c := viewF64(a)
	b := newF64Builder(len(c.vals))
	for i, x := range c.vals {
		if c.valid.null(i) {
			x = def.Float
		}
		b.append(x)
	}
	return b.finish(), nil
}
