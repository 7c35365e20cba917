package transform

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/cespare/xxhash/v2"
)

// Kernel computes an op over whole columns: in are the op's input arrays
// (all of the same length), n the checked node carrying the parameters.
// The output may share buffers with the inputs (arrays are immutable); the
// caller releases it. A list output may be a list-view over an input's
// elements (truncate); the executor makes it a list before returning it
// (Run) and before kernels other than the registry's view readers (hash,
// length) read it.
type Kernel func(in []arrow.Array, n *Node) (arrow.Array, error)

// How the kernels are fast (bench/transform.txt compares each with a plain
// row-at-a-time loop):
//   - no allocation per row: outputs are sized up front and built in Go
//     slices that become Arrow buffers without a copy;
//   - 8 bytes at a time where text is ASCII (SWAR: lower-casing, the
//     strip_punct fast path, the all-lower-case check, finding the end of
//     a token);
//   - work on a list's child elements as one flat column when the op maps
//     elements one for one (lower, strip_punct, hash), reusing the list's
//     offsets and validity;
//   - zero copy when the output equals the input (lower of lower-case
//     ASCII, truncate with no row too long, fill_missing without nulls),
//     and when it is a prefix of each row (truncate's list-view);
//   - sort keys with an 8-byte integer prefix for the set ops, and no
//     sort at all to intersect small rows;
//   - rows whose elements or bytes are contiguous copied at once (concat,
//     fill_missing, a list-view made a list), into memory Go does not
//     clear first when the kernel writes all of it (byteSink, makeNoZero);
//     a list-view's rows are copied in fixed-size blocks that overshoot,
//     so that a row's length costs no mispredicted branch (truncateRows);
//   - XXH64 inlined for int64s, and a small memo of recent strings' hashes
//     (hashfn.go).

func intParam(n *Node, name string) int64 {
	v, _ := n.Param(name)
	return v.Int
}

func floatParam(n *Node, name string) float64 {
	v, _ := n.Param(name)
	return v.Float
}

// --- ASCII tables and 8-byte word tricks ---

const (
	ones8 = 0x0101010101010101
	high8 = 0x8080808080808080
)

var (
	lowerASCII [128]byte
	// keepASCII[c] is 1 when strip_punct keeps ASCII byte c.
	keepASCII [128]uint8
	// spaceClass: 0 for a byte inside a token, 1 for an ASCII space, 2 for
	// the lead byte of a multi-byte code point that may be a space
	// (U+0085, U+00A0: C2; U+1680: E1; U+2000-U+205F: E2; U+3000: E3).
	spaceClass [256]uint8
)

func init() {
	for c := 0; c < 128; c++ {
		lowerASCII[c] = byte(unicode.ToLower(rune(c)))
		if !unicode.IsPunct(rune(c)) {
			keepASCII[c] = 1
		}
		if unicode.IsSpace(rune(c)) {
			spaceClass[c] = 1
		}
	}
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) {
			var b [4]byte
			utf8.EncodeRune(b[:], r)
			spaceClass[b[0]] = 2
		}
	}
}

// inRange flags (high bit of each byte) the bytes of w in [lo, hi]; every
// byte of w must be ASCII and 0 < lo <= hi < 0x80.
func inRange(w uint64, lo, hi byte) uint64 {
	return (w + (0x80-uint64(lo))*ones8) &^ (w + (0x80-uint64(hi)-1)*ones8) & high8
}

// lowerWord lower-cases the 8 ASCII bytes of w.
func lowerWord(w uint64) uint64 { return w | inRange(w, 'A', 'Z')>>2 }

// keptWord reports whether strip_punct keeps all 8 ASCII bytes of w as
// they are: letters, digits and spaces only.
func keptWord(w uint64) bool {
	return inRange(w, 'a', 'z')|inRange(w, 'A', 'Z')|inRange(w, '0', '9')|inRange(w, ' ', ' ') == high8
}

var runeErrorBytes = []byte(string(utf8.RuneError))

// --- lower, strip_punct ---

// appendLower appends lower(src) to dst (see the lower op's doc).
func appendLower(dst, src []byte) []byte {
	i := 0
	for i < len(src) {
		if i+8 <= len(src) {
			if w := binary.LittleEndian.Uint64(src[i:]); w&high8 == 0 {
				dst = binary.LittleEndian.AppendUint64(dst, lowerWord(w))
				i += 8
				continue
			}
		}
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, lowerASCII[c])
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
		if i+8 <= len(src) {
			if w := binary.LittleEndian.Uint64(src[i:]); w&high8 == 0 {
				if keptWord(w) {
					dst = binary.LittleEndian.AppendUint64(dst, w)
				} else {
					// Branch-free: write every byte, advance past the kept.
					j := len(dst)
					dst = slices.Grow(dst, 8)[:j+8]
					for _, c := range src[i : i+8] {
						dst[j] = c
						j += int(keepASCII[c])
					}
					dst = dst[:j]
				}
				i += 8
				continue
			}
		}
		c := src[i]
		if c < utf8.RuneSelf {
			if keepASCII[c] != 0 {
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

// scanASCII reports whether b has a byte >= 0x80 and, if not, whether it
// has an upper-case letter.
func scanASCII(b []byte) (nonASCII, upper bool) {
	var up uint64
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		if w&high8 != 0 {
			return true, false
		}
		up |= inRange(w, 'A', 'Z')
	}
	for ; i < len(b); i++ {
		if b[i] >= utf8.RuneSelf {
			return true, false
		}
		if 'A' <= b[i] && b[i] <= 'Z' {
			up = 1
		}
	}
	return false, up != 0
}

// mapText applies f to every row of c. Null rows give "".
func mapText(c strCol, f func(dst, src []byte) []byte) arrow.Array {
	size := len(c.bytes())
	data := make([]byte, 0, size+size/8+16)
	offs := make([]int32, c.n+1)
	for i := 0; i < c.n; i++ {
		if !c.valid.null(i) {
			data = f(data, c.data[c.offs[i]:c.offs[i+1]])
			checkOffsets(len(data))
		}
		offs[i+1] = int32(len(data))
	}
	valid, nulls := c.validity()
	return newStringArray(c.n, offs, data, valid, nulls)
}

// lowerText is lower over the rows of c: the input itself when it is
// lower-case ASCII already, one pass 8 bytes at a time when it is ASCII,
// row by row otherwise.
func lowerText(c strCol) (out arrow.Array, same bool) {
	nonASCII, upper := scanASCII(c.bytes())
	switch {
	case !nonASCII && !upper:
		return nil, true
	case !nonASCII:
		src := c.bytes()
		data := make([]byte, len(src))
		i := 0
		for ; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], lowerWord(binary.LittleEndian.Uint64(src[i:])))
		}
		for ; i < len(src); i++ {
			data[i] = lowerASCII[src[i]]
		}
		return c.withData(data), false
	}
	return mapText(c, appendLower), false
}

func kernelLower(in []arrow.Array, _ *Node) (arrow.Array, error) {
	if in[0].DataType().ID() == arrow.STRING {
		out, same := lowerText(viewStr(in[0]))
		if same {
			in[0].Retain()
			return in[0], nil
		}
		return out, nil
	}
	l := viewList(in[0])
	defer l.release()
	child, same := lowerText(l.str.elems(l.span()))
	if same {
		return l.result(), nil
	}
	defer child.Release()
	return l.withChild(child), nil
}

func kernelStripPunct(in []arrow.Array, _ *Node) (arrow.Array, error) {
	if in[0].DataType().ID() == arrow.STRING {
		return mapText(viewStr(in[0]), appendStripPunct), nil
	}
	l := viewList(in[0])
	defer l.release()
	child := mapText(l.str.elems(l.span()), appendStripPunct)
	defer child.Release()
	return l.withChild(child), nil
}

// --- tokenization ---

// nextToken returns the bounds of the first token of s at or after i, or
// start == len(s) when there is none. Tokens are maximal runs of code points
// that are not unicode.IsSpace; invalid UTF-8 bytes are not space. Only the
// lead bytes of multi-byte spaces need decoding: they are never
// continuation bytes, so every one of them starts a code point as
// strings.Fields decodes the text.
func nextToken(s []byte, i int) (start, end int) {
	for i < len(s) {
		switch spaceClass[s[i]] {
		case 0:
			goto token
		case 1:
			i++
		case 2:
			r, size := utf8.DecodeRune(s[i:])
			if !unicode.IsSpace(r) {
				goto token
			}
			i += size
		}
	}
	return i, i
token:
	start = i
	for i < len(s) {
		if i+8 <= len(s) {
			// Skip to the first byte that may end the token: one below
			// 0x21 or above 0x7f. The lowest flag is exact (a borrow only
			// starts at a byte below 0x21).
			w := binary.LittleEndian.Uint64(s[i:])
			if m := ((w-0x21*ones8)&^w | w) & high8; m == 0 {
				i += 8
				continue
			} else {
				i += bits.TrailingZeros64(m) >> 3
			}
		}
		switch spaceClass[s[i]] {
		case 0:
			i++
			continue
		case 1:
			return start, i
		}
		r, size := utf8.DecodeRune(s[i:])
		if unicode.IsSpace(r) {
			return start, i
		}
		i += size
	}
	return start, i
}

func kernelUnigrams(in []arrow.Array, _ *Node) (arrow.Array, error) {
	c := viewStr(in[0])
	size := len(c.bytes())
	data := make([]byte, 0, size)
	childOffs := make([]int32, 1, size/4+c.n+1)
	offs := make([]int32, c.n+1)
	for i := 0; i < c.n; i++ {
		if !c.valid.null(i) {
			// nextToken, inlined: most rows are a few short ASCII words.
			s := c.data[c.offs[i]:c.offs[i+1]]
			for k := 0; k < len(s); {
				switch spaceClass[s[k]] {
				case 1:
					k++
					continue
				case 2:
					if r, size := utf8.DecodeRune(s[k:]); unicode.IsSpace(r) {
						k += size
						continue
					}
				}
				st := k
				k++
			token:
				for k < len(s) {
					if k+8 <= len(s) {
						w := binary.LittleEndian.Uint64(s[k:])
						if m := ((w-0x21*ones8)&^w | w) & high8; m == 0 {
							k += 8
							continue
						} else {
							k += bits.TrailingZeros64(m) >> 3
						}
					}
					switch spaceClass[s[k]] {
					case 0:
						k++
					case 1:
						break token
					default:
						r, size := utf8.DecodeRune(s[k:])
						if unicode.IsSpace(r) {
							break token
						}
						k += size
					}
				}
				data = append(data, s[st:k]...)
				childOffs = append(childOffs, int32(len(data)))
			}
		}
		offs[i+1] = int32(len(childOffs) - 1)
	}
	valid, nulls := c.validity()
	return finishTextList(c.n, offs, childOffs, data, valid, nulls), nil
}

func kernelNgrams(in []arrow.Array, nd *Node) (arrow.Array, error) {
	n := int(intParam(nd, "n"))
	c := viewStr(in[0])
	size := len(c.bytes())
	data := make([]byte, 0, size*min(n, 4))
	childOffs := make([]int32, 1, size/4+c.n+1)
	offs := make([]int32, c.n+1)
	var toks [][2]int
	for i := 0; i < c.n; i++ {
		if !c.valid.null(i) {
			s := c.data[c.offs[i]:c.offs[i+1]]
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
						data = append(data, ' ')
					}
					tk := toks[t+k]
					data = append(data, s[tk[0]:tk[1]]...)
				}
				checkOffsets(len(data))
				childOffs = append(childOffs, int32(len(data)))
			}
		}
		offs[i+1] = int32(len(childOffs) - 1)
	}
	valid, nulls := c.validity()
	return finishTextList(c.n, offs, childOffs, data, valid, nulls), nil
}

// --- list and set ops ---

// operand is one input of a set op, concat or cross: a scalar or a list
// column, string or int64.
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
			ops[k] = operand{list: true, l: viewList(a)}
			ops[k].isText = ops[k].l.text
		case arrow.STRING:
			ops[k] = operand{s: viewStr(a), isText: true}
		default:
			ops[k] = operand{i: viewI64(a)}
		}
	}
	return ops
}

func releaseOperands(ops []operand) {
	for k := range ops {
		if ops[k].list {
			ops[k].l.release()
		}
	}
}

// sizes returns upper bounds of the elements and (text) bytes the operands
// contribute over all rows.
func sizes(ops []operand) (elems, bytes int) {
	for k := range ops {
		o := &ops[k]
		switch {
		case o.list:
			e0, e1 := o.l.span()
			elems += int(e1 - e0)
			if o.isText {
				bytes += int(o.l.str.offs[e1] - o.l.str.offs[e0])
			}
		case o.isText:
			elems += o.s.n
			bytes += len(o.s.bytes())
		default:
			elems += len(o.i.vals)
		}
	}
	return elems, bytes
}

// skey is a string with its first 8 bytes as a big-endian integer
// (zero-padded), so that most comparisons are one integer comparison. The
// order is bytewise string order: padded prefixes that differ order like
// the strings, and equal prefixes fall back to comparing the strings. s
// points into the input array (valid during the kernel call only).
type skey struct {
	pre uint64
	s   string
}

// keyAt returns the key of data[o:e]. data must be the whole data buffer:
// when 8 bytes can be read from o, the prefix is one load and a mask.
func keyAt(data []byte, o, e int32) skey {
	n := e - o
	var s string
	if n > 0 {
		s = unsafe.String(&data[o], n)
	}
	if int(o)+8 <= len(data) {
		p := binary.BigEndian.Uint64(data[o:])
		if n < 8 {
			p &= ^uint64(0) << (64 - 8*uint(n))
		}
		return skey{p, s}
	}
	var p uint64
	for k := int32(0); k < min(n, 8); k++ {
		p |= uint64(data[o+k]) << (56 - 8*k)
	}
	return skey{p, s}
}

func keyCmp(a, b skey) int {
	switch {
	case a.pre < b.pre:
		return -1
	case a.pre > b.pre:
		return 1
	case a.s < b.s:
		return -1
	case a.s > b.s:
		return 1
	}
	return 0
}

func keyEq(a, b skey) bool { return a.pre == b.pre && a.s == b.s }

// sortUniqueKeys sorts s and removes duplicates in place. Rows are short,
// so insertion sort beats the general sort below a few dozen elements.
func sortUniqueKeys(s []skey) []skey {
	if len(s) < 2 {
		return s
	}
	if len(s) <= 24 {
		for i := 1; i < len(s); i++ {
			x := s[i]
			j := i
			for ; j > 0 && keyCmp(x, s[j-1]) < 0; j-- {
				s[j] = s[j-1]
			}
			s[j] = x
		}
	} else {
		slices.SortFunc(s, keyCmp)
	}
	w := 1
	for r := 1; r < len(s); r++ {
		if !keyEq(s[r], s[w-1]) {
			s[w] = s[r]
			w++
		}
	}
	return s[:w]
}

// intersectKeys keeps the elements of a (sorted, unique) that are in b
// (sorted, unique), in place.
func intersectKeys(a, b []skey) []skey {
	w, j := 0, 0
	for _, x := range a {
		for j < len(b) && keyCmp(b[j], x) < 0 {
			j++
		}
		if j == len(b) {
			break
		}
		if keyEq(b[j], x) {
			a[w] = x
			w++
		}
	}
	return a[:w]
}

// filterKeys keeps the elements of a that are in b (any order), in place.
func filterKeys(a, b []skey) []skey {
	w := 0
	for _, x := range a {
		for _, y := range b {
			if keyEq(x, y) {
				a[w] = x
				w++
				break
			}
		}
	}
	return a[:w]
}

// appendKeys appends the string elements of row i of o.
func (o *operand) appendKeys(dst []skey, i int) []skey {
	if o.list {
		if o.l.valid.null(i) {
			return dst
		}
		c := &o.l.str
		offs := c.offs[o.l.offs[i] : o.l.offs[i+1]+1]
		for j := 0; j+1 < len(offs); j++ {
			dst = append(dst, keyAt(c.data, offs[j], offs[j+1]))
		}
		return dst
	}
	if o.s.valid.null(i) {
		return dst
	}
	return append(dst, keyAt(o.s.data, o.s.offs[i], o.s.offs[i+1]))
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

// sortUnique sorts s and removes duplicates in place.
func sortUnique(s []int64) []int64 {
	if len(s) < 2 {
		return s
	}
	if len(s) <= 24 {
		for i := 1; i < len(s); i++ {
			x := s[i]
			j := i
			for ; j > 0 && x < s[j-1]; j-- {
				s[j] = s[j-1]
			}
			s[j] = x
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

func intersectSorted(a, b []int64) []int64 {
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

func rows(in []arrow.Array) int { return in[0].Len() }

type setKind int

const (
	setUnion setKind = iota
	setIntersect
)

func setKernel(kind setKind) Kernel {
	return func(in []arrow.Array, _ *Node) (arrow.Array, error) {
		ops := operands(in)
		defer releaseOperands(ops)
		n := rows(in)
		elems, bytes := sizes(ops)
		offs := make([]int32, n+1)
		if ops[0].isText {
			if kind == setIntersect {
				elems, bytes = sizes(ops[:1])
			}
			childOffs := make([]int32, 1, elems+1)
			data := make([]byte, 0, bytes)
			var acc, tmp []skey
			for i := 0; i < n; i++ {
				acc = acc[:0]
				switch kind {
				case setUnion:
					for k := range ops {
						acc = ops[k].appendKeys(acc, i)
					}
					acc = sortUniqueKeys(acc)
				case setIntersect:
					acc = sortUniqueKeys(ops[0].appendKeys(acc, i))
					for k := 1; k < len(ops) && len(acc) > 0; k++ {
						tmp = ops[k].appendKeys(tmp[:0], i)
						if len(acc)*len(tmp) <= 64 {
							// Small rows: look each value up, no sort.
							acc = filterKeys(acc, tmp)
						} else {
							acc = intersectKeys(acc, sortUniqueKeys(tmp))
						}
					}
				}
				for _, x := range acc {
					data = append(data, x.s...)
					childOffs = append(childOffs, int32(len(data)))
				}
				offs[i+1] = int32(len(childOffs) - 1)
			}
			return finishTextList(n, offs, childOffs, data, nil, 0), nil
		}
		if kind == setIntersect {
			elems, _ = sizes(ops[:1])
		}
		vals := make([]int64, 0, elems)
		var acc, tmp []int64
		for i := 0; i < n; i++ {
			acc = acc[:0]
			switch kind {
			case setUnion:
				for k := range ops {
					acc = ops[k].appendInts(acc, i)
				}
				acc = sortUnique(acc)
			case setIntersect:
				acc = sortUnique(ops[0].appendInts(acc, i))
				for k := 1; k < len(ops) && len(acc) > 0; k++ {
					tmp = sortUnique(ops[k].appendInts(tmp[:0], i))
					acc = intersectSorted(acc, tmp)
				}
			}
			vals = append(vals, acc...)
			offs[i+1] = int32(len(vals))
		}
		return finishIntList(n, offs, vals, nil, 0), nil
	}
}

// finishTextList builds a list<string> array.
func finishTextList(n int, offs, childOffs []int32, data []byte, valid *memory.Buffer, nulls int) arrow.Array {
	checkOffsets(len(childOffs))
	child := newStringArray(len(childOffs)-1, childOffs, data, nil, 0) // checks len(data)
	defer child.Release()
	return newListArray(arrow.ListOf(arrow.BinaryTypes.String), n, offs, valid, nulls, child)
}

// finishIntList builds a list<int64> array.
func finishIntList(n int, offs []int32, vals []int64, valid *memory.Buffer, nulls int) arrow.Array {
	checkOffsets(len(vals))
	child := newInt64Array(vals, nil, 0)
	defer child.Release()
	return newListArray(arrow.ListOf(arrow.PrimitiveTypes.Int64), n, offs, valid, nulls, child)
}

func newInt64Array(vals []int64, valid *memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(arrow.PrimitiveTypes.Int64, len(vals),
		[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(vals))}, nil, nulls, 0)
	defer d.Release()
	return array.NewInt64Data(d)
}

func newFloat64Array(vals []float64, valid *memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(arrow.PrimitiveTypes.Float64, len(vals),
		[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(vals))}, nil, nulls, 0)
	defer d.Release()
	return array.NewFloat64Data(d)
}

var (
	kernelUnion     = setKernel(setUnion)
	kernelIntersect = setKernel(setIntersect)
	kernelDedupe    = setKernel(setUnion) // dedupe(l) == union(l)
)

func kernelConcat(in []arrow.Array, _ *Node) (arrow.Array, error) {
	ops := operands(in)
	defer releaseOperands(ops)
	n := rows(in)
	elems, bytes := sizes(ops)
	offs := make([]int32, n+1)
	if ops[0].isText {
		childOffs := make([]int32, 1, elems+1)
		data := make([]byte, 0, bytes)
		for i := 0; i < n; i++ {
			for k := range ops {
				o := &ops[k]
				if o.list {
					if o.l.valid.null(i) {
						continue
					}
					// The row's elements are contiguous in the child: copy
					// their bytes at once and shift their offsets.
					e0, e1 := o.l.offs[i], o.l.offs[i+1]
					if e0 == e1 {
						continue
					}
					c := &o.l.str
					delta := int32(len(data)) - c.offs[e0]
					data = append(data, c.data[c.offs[e0]:c.offs[e1]]...)
					for _, off := range c.offs[e0+1 : e1+1] {
						childOffs = append(childOffs, off+delta)
					}
					continue
				}
				if o.s.valid.null(i) {
					continue
				}
				data = append(data, o.s.data[o.s.offs[i]:o.s.offs[i+1]]...)
				childOffs = append(childOffs, int32(len(data)))
			}
			offs[i+1] = int32(len(childOffs) - 1)
		}
		return finishTextList(n, offs, childOffs, data, nil, 0), nil
	}
	vals := make([]int64, 0, elems)
	for i := 0; i < n; i++ {
		for k := range ops {
			vals = ops[k].appendInts(vals, i)
		}
		offs[i+1] = int32(len(vals))
	}
	return finishIntList(n, offs, vals, nil, 0), nil
}

func kernelTruncate(in []arrow.Array, nd *Node) (arrow.Array, error) {
	max := int32(intParam(nd, "max"))
	l := viewList(in[0])
	defer l.release()
	long := false
	for i := 0; i < l.n && !long; i++ {
		long = l.offs[i+1]-l.offs[i] > max && !l.valid.null(i)
	}
	if !long {
		return l.result(), nil
	}
	valid, nulls := validityOf(l.arr)
	if l.text {
		return truncateText(&l, max, valid, nulls)
	}
	offs := make([]int32, l.n+1)
	e0, e1 := l.span()
	vals := make([]int64, 0, e1-e0)
	for i := 0; i < l.n; i++ {
		if !l.valid.null(i) {
			s := l.offs[i]
			vals = append(vals, l.i64.vals[s:s+min(l.offs[i+1]-s, max)]...)
		}
		offs[i+1] = int32(len(vals))
	}
	return finishIntList(l.n, offs, vals, valid, nulls), nil
}

// truncateText is truncate on list<string>. A row keeps a prefix of its
// elements, so its result is a list-view (Arrow's list layout with an
// offset and a size per row, which need not tile the child) over the
// input's own child: the input's offsets, a new size per row, no element
// copied, as row[:max] shares a Go slice's strings. hash and length read
// the view as it is; where a contiguous list is needed, before another
// kernel reads it and at a graph's output, the executor copies the kept
// elements once (compactTextView).
func truncateText(l *listView, max int32, valid *memory.Buffer, nulls int) (arrow.Array, error) {
	n := l.n
	lo := l.offs[:n+1]
	// The view is read later, by other kernels or the copy into a list:
	// check here that its rows index the child.
	if lo[0] < 0 || int(lo[n]) >= len(l.str.offs) {
		return nil, fmt.Errorf("truncate: list offsets [%d, %d] out of the child's range [0, %d]", lo[0], lo[n], len(l.str.offs)-1)
	}
	sizes := makeInt32NoZero(n)
	bad := int32(0)
	if l.valid.bits == nil {
		for i, o := range lo[1:] {
			d := o - lo[i]
			bad |= d
			sizes[i] = min(d, max)
		}
	} else {
		for i, o := range lo[1:] {
			d := o - lo[i]
			bad |= d
			sizes[i] = min(d, max)
			if l.valid.null(i) {
				sizes[i] = 0
			}
		}
	}
	if bad < 0 {
		return nil, fmt.Errorf("truncate: list offsets decrease")
	}
	// The list's offsets buffer serves as the view's where the list starts
	// at its first slot (a list-view's offsets are not followed by an end).
	offsets := l.arr.Data().Buffers()[1]
	if l.arr.Data().Offset() != 0 {
		offsets = memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(slices.Clone(lo[:n])))
	}
	d := array.NewData(arrow.ListViewOf(arrow.BinaryTypes.String), n,
		[]*memory.Buffer{valid, offsets, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(sizes))},
		[]arrow.ArrayData{l.arr.ListValues().Data()}, nulls, 0)
	defer d.Release()
	return array.NewListViewData(d), nil
}

// viewRows reads a list-view whose child has element offsets co: it
// returns each row's first element (lo) and the offsets of the list that
// holds the same rows contiguously (offs: a null row holds nothing), and
// checks that every row indexes the child. With disjoint, it also checks
// that each row starts at or after the previous one's end (as truncate
// leaves them), so that the rows cover at most the elements from lo[0] to
// the last row's end, which it returns. The checks fold into the sign
// bit of one accumulator rather than a branch each.
func viewRows(v *array.ListView, co []int32, disjoint bool) (lo, offs []int32, end int32, err error) {
	n := v.Len()
	off := v.Data().Offset()
	lo, sizes := v.Offsets()[off:off+n], v.Sizes()[off:off+n]
	valid := bitmapOf(v)
	offs = makeInt32NoZero(n + 1)
	offs[0] = 0
	last := int64(len(co) - 1)
	w, bad, prev := int64(0), int64(0), int64(0)
	if n > 0 {
		prev = int64(lo[0])
	}
	for i, s := range lo {
		k := sizes[i]
		if valid.null(i) {
			k = 0
		}
		e := int64(s) + int64(k)
		bad |= int64(k) | int64(s) | (last - e)
		if disjoint {
			bad |= int64(s) - prev
		}
		prev = e
		w += int64(k)
		offs[i+1] = int32(w)
	}
	if bad < 0 {
		return nil, nil, 0, fmt.Errorf("list-view rows overlap, have a negative size or are not in the child's %d elements", last)
	}
	if w > math.MaxInt32 {
		return nil, nil, 0, fmt.Errorf("list-view rows hold %d elements, beyond 32-bit offsets", w)
	}
	return lo, offs, int32(prev), nil
}

// compactTextView copies a list-view of strings into a list: each row's
// elements, contiguous in the child, as one copy of bytes and one shift of
// offsets (truncateRows), into buffers sized by a first pass (viewRows,
// which writes the list's offsets, and checks that the rows are disjoint,
// so that the bytes of the child's span bound the copy), and written in
// full, so not cleared first.
func compactTextView(v *array.ListView) (arrow.Array, error) {
	n := v.Len()
	c := viewStr(v.ListValues())
	lo, offs, end, err := viewRows(v, c.offs, true)
	if err != nil {
		return nil, err
	}
	vb, nulls := validityOf(v)
	w, span := offs[n], int32(0)
	if n > 0 {
		span = c.offs[end] - c.offs[lo[0]]
	}
	if span < 0 {
		return nil, fmt.Errorf("list-view child: offsets decrease")
	}
	childOffs := makeInt32NoZero(int(w) + 1 + truncOffsBlock)
	data := makeNoZero(int(span) + truncByteBlock)
	pos := truncateRows(lo, offs, c.offs, c.data, childOffs, data)
	return finishTextList(n, offs, childOffs[:w+1], data[:pos], vb, nulls), nil
}

// hashTextView is hash on a list-view of strings (truncate's result): the
// elements its rows hold, row by row, into a list of their hashes, with no
// copy of the strings first.
func hashTextView(v *array.ListView, salt, buckets int64) (arrow.Array, error) {
	n := v.Len()
	c := viewStr(v.ListValues())
	lo, offs, _, err := viewRows(v, c.offs, false)
	if err != nil {
		return nil, err
	}
	vals := make([]int64, offs[n])
	hc := newHashCache(salt, buckets)
	for i, s := range lo {
		w := offs[i]
		for j := range offs[i+1] - w {
			vals[w+j] = hc.bucket(c.data, c.offs[s+j], c.offs[s+j+1])
		}
	}
	vb, nulls := validityOf(v)
	return finishIntList(n, offs, vals, vb, nulls), nil
}

const (
	truncByteBlock = 64 // bytes truncateRows copies at a time
	truncOffsBlock = 8  // offsets truncateRows shifts at a time
)

// truncateRows copies the first offs[i+1]-offs[i] elements of each row i
// (elements lo[i]... of a string child with offsets co and bytes src) to
// childOffs[offs[i]+1...] and data, and returns the bytes written. Rows
// must index co in increasing order without overlap; childOffs has
// offs[n]+1+truncOffsBlock elements and data truncByteBlock bytes of slack
// beyond the bytes the rows cover.
//
// Both copies go in fixed-size blocks that overshoot into what the next
// row overwrites, so that a typical row (up to 64 bytes, up to 8 elements)
// takes no branch that depends on its length; they use unsafe pointers
// because, with bounds checks on every block, the loop has more variables
// than the compiler has registers (and it ran slower). Every access is in
// bounds: the blocks are taken only where the block-rounded ranges fit,
// checked per row (co and the data may come from a malformed array; lo was
// checked, offs and childOffs are built by the caller); other rows go
// through copy and range.
func truncateRows(lo, offs, co []int32, src []byte, childOffs []int32, data []byte) int32 {
	pco := unsafe.Pointer(unsafe.SliceData(co))
	psrc := unsafe.Pointer(unsafe.SliceData(src))
	pdata := unsafe.Pointer(unsafe.SliceData(data))
	pchild := unsafe.Pointer(unsafe.SliceData(childOffs))
	nco, nsrc, ndata := len(co), len(src), len(data)-truncByteBlock
	childOffs[0] = 0
	pos := int32(0) // bytes written
	for i := range len(offs) - 1 {
		s, w, k := lo[i], offs[i], offs[i+1]-offs[i]
		b0, b1 := co[s], co[s+k]
		nb := b1 - b0
		if 0 <= b0 && 0 <= nb && int(b1)+truncByteBlock <= nsrc && int(pos)+int(nb) <= ndata {
			for j := int32(0); j < nb; j += truncByteBlock {
				d, c := unsafe.Add(pdata, int(pos+j)), unsafe.Add(psrc, int(b0+j))
				*(*[16]byte)(d) = *(*[16]byte)(c)
				*(*[16]byte)(unsafe.Add(d, 16)) = *(*[16]byte)(unsafe.Add(c, 16))
				*(*[16]byte)(unsafe.Add(d, 32)) = *(*[16]byte)(unsafe.Add(c, 32))
				*(*[16]byte)(unsafe.Add(d, 48)) = *(*[16]byte)(unsafe.Add(c, 48))
			}
		} else {
			copy(data[pos:pos+nb], src[b0:b1])
		}
		delta := pos - b0
		if int(s+k)+truncOffsBlock < nco {
			for j := int32(0); j < k; j += truncOffsBlock {
				d := (*[truncOffsBlock]int32)(unsafe.Add(pchild, 4*int(w+1+j)))
				o := (*[truncOffsBlock]int32)(unsafe.Add(pco, 4*int(s+1+j)))
				d[0], d[1], d[2], d[3] = o[0]+delta, o[1]+delta, o[2]+delta, o[3]+delta
				d[4], d[5], d[6], d[7] = o[4]+delta, o[5]+delta, o[6]+delta, o[7]+delta
			}
		} else {
			for j, o := range co[s+1 : s+1+k] {
				childOffs[w+1+int32(j)] = o + delta
			}
		}
		pos += nb
	}
	return pos
}

func kernelLength(in []arrow.Array, _ *Node) (arrow.Array, error) {
	if v, ok := in[0].(*array.ListView); ok { // truncate's result: its sizes
		n, off := v.Len(), v.Data().Offset()
		vals := make([]int64, n)
		for i, k := range v.Sizes()[off : off+n] {
			if k < 0 {
				return nil, fmt.Errorf("list-view row %d: size %d", i, k)
			}
			vals[i] = int64(k)
		}
		forNulls(bitmapOf(v), n, func(i int) { vals[i] = 0 })
		return newInt64Array(vals, nil, 0), nil
	}
	l := viewList(in[0])
	defer l.release()
	vals := make([]int64, l.n)
	offs := l.offs[:l.n+1]
	for i := range vals {
		vals[i] = int64(offs[i+1] - offs[i])
	}
	forNulls(l.valid, l.n, func(i int) { vals[i] = 0 })
	return newInt64Array(vals, nil, 0), nil
}

// forNulls calls f for every null row of a column of n rows, in order,
// 64 rows at a time where the bitmap allows.
func forNulls(v bitmap, n int, f func(i int)) {
	if v.bits == nil {
		return
	}
	i := 0
	for ; i < n && (v.off+i)&63 != 0; i++ {
		if v.null(i) {
			f(i)
		}
	}
	for ; i+64 <= n; i += 64 {
		w := ^binary.LittleEndian.Uint64(v.bits[(v.off+i)>>3:])
		for w != 0 {
			f(i + bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
	for ; i < n; i++ {
		if v.null(i) {
			f(i)
		}
	}
}

// --- hashing ---

func kernelHash(in []arrow.Array, nd *Node) (arrow.Array, error) {
	salt, buckets := intParam(nd, "salt"), intParam(nd, "buckets")
	a := in[0]
	switch a.DataType().ID() {
	case arrow.STRING:
		c := viewStr(a)
		vals := make([]int64, c.n)
		hashStrs(vals, c, salt, buckets)
		forNulls(c.valid, c.n, func(i int) { vals[i] = 0 })
		valid, nulls := c.validity()
		return newInt64Array(vals, valid, nulls), nil
	case arrow.INT64:
		c := viewI64(a)
		vals := make([]int64, len(c.vals))
		hashInts(vals, c.vals, salt, buckets)
		forNulls(c.valid, len(vals), func(i int) { vals[i] = 0 })
		valid, nulls := validityOf(a)
		return newInt64Array(vals, valid, nulls), nil
	}
	if v, ok := a.(*array.ListView); ok && v.ListValues().DataType().ID() == arrow.STRING {
		return hashTextView(v, salt, buckets)
	}
	// Elementwise: hash the span of child elements as one flat column and
	// keep the list's shape.
	l := viewList(a)
	defer l.release()
	e0, e1 := l.span()
	vals := make([]int64, e1-e0)
	if l.text {
		hashStrs(vals, l.str.elems(e0, e1), salt, buckets)
	} else {
		hashInts(vals, l.i64.vals[e0:e1], salt, buckets)
	}
	child := newInt64Array(vals, nil, 0)
	defer child.Release()
	return l.withChild(child), nil
}

// hashStrs sets dst[i] to hash(x) of row i of c, null rows included.
func hashStrs(dst []int64, c strCol, salt, buckets int64) {
	hc := newHashCache(salt, buckets)
	for i := range dst {
		dst[i] = hc.bucket(c.data, c.offs[i], c.offs[i+1])
	}
}

// hashInts sets dst[i] to hash(src[i]).
func hashInts(dst, src []int64, salt, buckets int64) {
	s, d := uint64(salt)*golden, uint64(buckets)
	for i, v := range src {
		dst[i] = int64(fmix64(hashInt64(v)+s) % d)
	}
}

// MaxCrossPairs bounds the output of cross() per row.
const MaxCrossPairs = 1 << 16

func (o *operand) appendHashes(dst []uint64, i int) []uint64 {
	if o.list {
		if o.l.valid.null(i) {
			return dst
		}
		if o.isText {
			c := &o.l.str
			for j := o.l.offs[i]; j < o.l.offs[i+1]; j++ {
				dst = append(dst, xxhash.Sum64(c.data[c.offs[j]:c.offs[j+1]]))
			}
			return dst
		}
		for _, v := range o.l.i64.vals[o.l.offs[i]:o.l.offs[i+1]] {
			dst = append(dst, hashInt64(v))
		}
		return dst
	}
	if o.isText {
		if o.s.valid.null(i) {
			return dst
		}
		return append(dst, xxhash.Sum64(o.s.data[o.s.offs[i]:o.s.offs[i+1]]))
	}
	if o.i.valid.null(i) {
		return dst
	}
	return append(dst, hashInt64(o.i.vals[i]))
}

func kernelCross(in []arrow.Array, nd *Node) (arrow.Array, error) {
	d := uint64(intParam(nd, "buckets"))
	ops := operands(in)
	defer releaseOperands(ops)
	n := rows(in)
	offs := make([]int32, n+1)
	ea, _ := sizes(ops[:1])
	eb, _ := sizes(ops[1:])
	vals := make([]int64, 0, max(ea, eb))
	var ha, hb []uint64
	for i := 0; i < n; i++ {
		ha = ops[0].appendHashes(ha[:0], i)
		hb = ops[1].appendHashes(hb[:0], i)
		if len(ha)*len(hb) > MaxCrossPairs {
			return nil, fmt.Errorf("cross: row %d has %d x %d pairs, more than the limit of %d", i, len(ha), len(hb), MaxCrossPairs)
		}
		for _, x := range ha {
			x *= golden
			for _, y := range hb {
				vals = append(vals, int64(fmix64(x+y)%d))
			}
		}
		checkOffsets(len(vals))
		offs[i+1] = int32(len(vals))
	}
	return finishIntList(n, offs, vals, nil, 0), nil
}

// --- numeric ---

// Numeric kernels compute every row, nulls included (whatever lies under
// a null), and give the output the input's validity: no branch per row.

// floatsOf returns the values of an int64 or float64 column as float64s.
func floatsOf(a arrow.Array) []float64 {
	if a.DataType().ID() == arrow.INT64 {
		iv := viewI64(a).vals
		f := make([]float64, len(iv))
		for i, v := range iv {
			f[i] = float64(v)
		}
		return f
	}
	return viewF64(a).vals
}

func kernelBucketize(in []arrow.Array, nd *Node) (arrow.Array, error) {
	bounds, _ := nd.Param("boundaries")
	bs := bounds.Floats
	xs := floatsOf(in[0])
	vals := make([]int64, len(xs))
	nan := false
	if len(bs) <= 16 {
		// Count the boundaries <= x: branch-free.
		for i, x := range xs {
			k := 0
			for _, b := range bs {
				if b <= x {
					k++
				}
			}
			vals[i] = int64(k)
			nan = nan || x != x
		}
	} else {
		for i, x := range xs {
			lo, hi := 0, len(bs)
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				if bs[m] <= x {
					lo = m + 1
				} else {
					hi = m
				}
			}
			vals[i] = int64(lo)
			nan = nan || x != x
		}
	}
	v := bitmapOf(in[0])
	valid, nulls := validityOf(in[0])
	if nan {
		// NaN -> null: a new bitmap.
		bits := make([]byte, (len(xs)+7)/8)
		if valid != nil {
			bitutil.CopyBitmap(v.bits, v.off, len(xs), bits, 0)
		} else {
			bitutil.SetBitsTo(bits, 0, int64(len(xs)), true)
		}
		for i, x := range xs {
			if x != x {
				bitutil.ClearBit(bits, i)
			}
		}
		valid = memory.NewBufferBytes(bits)
		nulls = len(xs) - bitutil.CountSetBits(bits, 0, len(xs))
	}
	forNulls(v, len(xs), func(i int) { vals[i] = 0 })
	return newInt64Array(vals, valid, nulls), nil
}

func kernelLog1p(in []arrow.Array, _ *Node) (arrow.Array, error) {
	// log1pInto gives math.Log1p's bits without its value-dependent
	// branches.
	var vals []float64
	if in[0].DataType().ID() == arrow.INT64 {
		iv := viewI64(in[0]).vals
		vals = make([]float64, len(iv))
		for i, v := range iv {
			vals[i] = float64(v)
		}
		log1pInto(vals, vals)
	} else {
		fv := viewF64(in[0]).vals
		vals = make([]float64, len(fv))
		log1pInto(vals, fv)
	}
	valid, nulls := validityOf(in[0])
	forNulls(bitmapOf(in[0]), len(vals), func(i int) { vals[i] = 0 })
	return newFloat64Array(vals, valid, nulls), nil
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
	valid, nulls := validityOf(in[0])
	if in[0].DataType().ID() == arrow.INT64 {
		ilo, ihi := ClipInt64Bounds(lo, hi)
		iv := viewI64(in[0]).vals
		vals := make([]int64, len(iv))
		for i, x := range iv {
			vals[i] = min(max(x, ilo), ihi)
		}
		forNulls(bitmapOf(in[0]), len(vals), func(i int) { vals[i] = 0 })
		return newInt64Array(vals, valid, nulls), nil
	}
	fv := viewF64(in[0]).vals
	vals := make([]float64, len(fv))
	for i, x := range fv {
		// min(max(x, lo), hi) as math.Max and math.Min compute it, with
		// lo <= hi and no -0 among them (Check normalizes): a NaN fails
		// every comparison and stays as it is, and only a zero needs their
		// signed-zero rule.
		switch {
		case x < lo:
			x = lo
		case x > hi:
			x = hi
		case x == 0:
			x = math.Min(math.Max(x, lo), hi)
		}
		vals[i] = x
	}
	forNulls(bitmapOf(in[0]), len(vals), func(i int) { vals[i] = 0 })
	return newFloat64Array(vals, valid, nulls), nil
}

func kernelFillMissing(in []arrow.Array, nd *Node) (arrow.Array, error) {
	def, _ := nd.Param("default")
	a := in[0]
	if a.NullN() == 0 {
		a.Retain()
		return a, nil
	}
	v := bitmapOf(a)
	switch a.DataType().ID() {
	case arrow.STRING:
		c := viewStr(a)
		d := []byte(def.Str)
		data := newByteSink(len(c.bytes()) + a.NullN()*len(d))
		offs := makeInt32NoZero(c.n + 1) // written in full
		offs[0] = 0
		next := 0 // next row to copy
		// copyRows copies rows [i, j), all valid, at once: their bytes are
		// contiguous, their offsets shift by one constant.
		copyRows := func(i, j int) {
			if i == j {
				return
			}
			delta := data.len() - c.offs[i]
			data.write(c.data[c.offs[i]:c.offs[j]])
			src := c.offs[i+1 : j+1]
			dst := offs[i+1 : j+1]
			dst = dst[:len(src)] // lets the compiler drop bounds checks
			for k, o := range src {
				dst[k] = o + delta
			}
		}
		forNulls(v, c.n, func(i int) {
			copyRows(next, i)
			data.write(d)
			offs[i+1] = data.len()
			next = i + 1
		})
		copyRows(next, c.n)
		return newStringArray(c.n, offs, data.bytes(), nil, 0), nil
	case arrow.INT64:
		vals := slices.Clone(viewI64(a).vals)
		forNulls(v, len(vals), func(i int) { vals[i] = def.Int })
		return newInt64Array(vals, nil, 0), nil
	}
	vals := slices.Clone(viewF64(a).vals)
	forNulls(v, len(vals), func(i int) { vals[i] = def.Float })
	return newFloat64Array(vals, nil, 0), nil
}
