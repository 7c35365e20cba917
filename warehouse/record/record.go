package record

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sigdata/sig/transform"
)

// Header names and content types. Header names are matched without regard
// to case (IsContentTypeHeader); content types are media types, parsed as
// RFC 2045 says (ParseContentType).
const (
	HeaderContentType = "content-type"
	ContentTypeJSON   = "application/json"
	ContentTypeRow    = "application/vnd.sig.row.v1"
	// DefaultMaxBytes is the default maximum size of a record value.
	DefaultMaxBytes = 64 << 10
)

// HeaderKind names a record's kind (Kind); absent, the record is an event.
const HeaderKind = "sig-kind"

// Kind is what a record does to the warehouse.
type Kind uint8

const (
	// KindEvent adds an event (a "late" one when its window was already
	// sealed). The default.
	KindEvent Kind = iota
	// KindUpdate overwrites some columns of a stored event: event_id and
	// event_time name it, the other keys are the new values.
	KindUpdate
	// KindDelete removes a stored event: event_id and event_time name it.
	KindDelete
)

// Kinds are the record kinds, by their header values.
var Kinds = []Kind{KindEvent, KindUpdate, KindDelete}

func (k Kind) String() string {
	switch k {
	case KindEvent:
		return "event"
	case KindUpdate:
		return "update"
	case KindDelete:
		return "delete"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// IsKindHeader reports whether a Kafka record header named key is the kind
// header (names are case-insensitive).
func IsKindHeader(key string) bool { return strings.EqualFold(key, HeaderKind) }

// ParseKind parses a kind header's value, in any case; "" is KindEvent. An
// unknown kind is malformed (ReasonKind).
func ParseKind(v string) (Kind, error) {
	switch {
	case v == "" || strings.EqualFold(v, "event"):
		return KindEvent, nil
	case strings.EqualFold(v, "update"):
		return KindUpdate, nil
	case strings.EqualFold(v, "delete"):
		return KindDelete, nil
	}
	return 0, malformed(ReasonKind, "unknown %s %q (want event, update or delete)", HeaderKind, v)
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed record")

const rowMagic = "SR\x01"

// fingerprintPrefix is the first 8 bytes of the schema fingerprint.
func fingerprintPrefix(s *transform.Schema) [8]byte {
	var p [8]byte
	b, err := hex.DecodeString(s.Fingerprint()[:16])
	if err == nil {
		copy(p[:], b)
	}
	return p
}

// Encoder builds record values for one schema. Call Begin, then one value
// method per column in schema order, then Bytes. Not safe for concurrent use.
type Encoder struct {
	schema *transform.Schema
	ct     string
	fp     [8]byte
	buf    []byte
	col    int
}

// NewEncoder returns an encoder of contentType (ContentTypeRow or
// ContentTypeJSON).
func NewEncoder(s *transform.Schema, contentType string) (*Encoder, error) {
	if contentType != ContentTypeRow && contentType != ContentTypeJSON {
		return nil, fmt.Errorf("record: unknown content type %q", contentType)
	}
	return &Encoder{schema: s, ct: contentType, fp: fingerprintPrefix(s)}, nil
}

// ContentType returns the encoder's content type, for the record header.
func (e *Encoder) ContentType() string { return e.ct }

// Begin starts a new record.
func (e *Encoder) Begin() {
	e.col = 0
	e.buf = e.buf[:0]
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, rowMagic...)
		e.buf = append(e.buf, e.fp[:]...)
	} else {
		e.buf = append(e.buf, '{')
	}
}

func (e *Encoder) field() {
	if e.ct == ContentTypeJSON {
		if e.col > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = strconv.AppendQuote(e.buf, e.schema.Fields[e.col].Name)
		e.buf = append(e.buf, ':')
	}
	e.col++
}

// Null appends a null for the next column.
func (e *Encoder) Null() {
	e.field()
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, 0)
	} else {
		e.buf = append(e.buf, "null"...)
	}
}

// Int64 appends an int64 for the next column.
func (e *Encoder) Int64(v int64) {
	e.field()
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, 1)
		e.buf = binary.AppendVarint(e.buf, v)
	} else {
		e.buf = strconv.AppendInt(e.buf, v, 10)
	}
}

// Float64 appends a float64 for the next column. NaN and infinities have no
// JSON form; in JSON they are written as null.
func (e *Encoder) Float64(v float64) {
	if e.ct == ContentTypeJSON && (math.IsNaN(v) || math.IsInf(v, 0)) {
		e.Null()
		return
	}
	e.field()
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, 1)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(v))
	} else {
		e.buf = strconv.AppendFloat(e.buf, v, 'g', -1, 64)
	}
}

// String appends a string for the next column.
func (e *Encoder) String(s string) {
	e.field()
	e.appendString(s)
}

func (e *Encoder) appendString(s string) {
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, 1)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
		e.buf = append(e.buf, s...)
	} else {
		e.buf, _ = jsontext.AppendQuote(e.buf, s)
	}
}

// StringList appends a list<string> for the next column.
func (e *Encoder) StringList(l []string) {
	e.field()
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, 1)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(l)))
		for _, s := range l {
			e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
			e.buf = append(e.buf, s...)
		}
		return
	}
	e.buf = append(e.buf, '[')
	for i, s := range l {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf, _ = jsontext.AppendQuote(e.buf, s)
	}
	e.buf = append(e.buf, ']')
}

// Int64List appends a list<int64> for the next column.
func (e *Encoder) Int64List(l []int64) {
	e.field()
	if e.ct == ContentTypeRow {
		e.buf = append(e.buf, 1)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(l)))
		for _, v := range l {
			e.buf = binary.AppendVarint(e.buf, v)
		}
		return
	}
	e.buf = append(e.buf, '[')
	for i, v := range l {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = strconv.AppendInt(e.buf, v, 10)
	}
	e.buf = append(e.buf, ']')
}

// Bytes returns a copy of the finished record value. It panics if not every
// column was given a value.
func (e *Encoder) Bytes() []byte {
	if e.col != len(e.schema.Fields) {
		panic(fmt.Sprintf("record: %d of %d columns encoded", e.col, len(e.schema.Fields)))
	}
	if e.ct == ContentTypeJSON {
		return append(bytes.Clone(e.buf), '}')
	}
	return bytes.Clone(e.buf)
}

// value is one decoded column value; strings alias the input or scratch.
type value struct {
	null bool
	i    int64
	f    float64
	s    []byte
	ls   [][]byte
	li   []int64
}

// Decoder decodes and validates record values of one schema into a scratch
// row, which AppendTo copies into Arrow builders. Not safe for concurrent
// use; a decoded row is valid until the next Decode.
type Decoder struct {
	schema   *transform.Schema
	types    []transform.Type
	index    map[string]int
	maxBytes int
	fp       [8]byte
	vals     []value
	seen     []bool
	idCol    int
	timeCol  int
	kind     Kind
	jd       *jsontext.Decoder
	jr       bytes.Reader
	scratch  []byte
	// lastCT and lastEnc remember the last content type that needed
	// parsing: a producer sends the same header on every record.
	lastCT  string
	lastEnc encoding
	lastErr error
}

// encoding is a record value's encoding, selected by its content type.
type encoding uint8

const (
	encJSON encoding = iota
	encRow
)

// IsContentTypeHeader reports whether a Kafka record header named key is the
// content type. Header names are case-insensitive, as in HTTP and MIME:
// "Content-Type" is the content type too.
func IsContentTypeHeader(key string) bool { return strings.EqualFold(key, HeaderContentType) }

// ParseContentType checks a content-type header value and returns its media
// type (lower case): ContentTypeJSON for an empty value, ContentTypeJSON or
// ContentTypeRow otherwise. The value is parsed as a media type with
// parameters (RFC 2045, mime.ParseMediaType): the type and subtype are
// case-insensitive, and "application/json; charset=utf-8" is JSON. A charset
// parameter must name UTF-8 (any case), the only encoding of record strings;
// other parameters are ignored, as the media-type rules say unknown ones must
// be. Errors wrap ErrMalformed and say what is wrong.
func ParseContentType(v string) (string, error) {
	enc, err := parseContentType(v)
	if err != nil {
		return "", err
	}
	if enc == encRow {
		return ContentTypeRow, nil
	}
	return ContentTypeJSON, nil
}

func parseContentType(v string) (encoding, error) {
	switch v {
	case "", ContentTypeJSON:
		return encJSON, nil
	case ContentTypeRow:
		return encRow, nil
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		return 0, malformed(ReasonContentType, "content-type %q is not a media type: %v", v, err)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return 0, malformed(ReasonContentType, "content-type %q: charset %q is not supported (record values are UTF-8)", v, cs)
	}
	switch mt {
	case ContentTypeJSON:
		return encJSON, nil
	case ContentTypeRow:
		return encRow, nil
	}
	return 0, malformed(ReasonContentType, "unknown content-type %q (want %s or %s)", v, ContentTypeJSON, ContentTypeRow)
}

// encodingOf parses a content type, remembering the last one parsed.
func (d *Decoder) encodingOf(v string) (encoding, error) {
	if v == "" || v == ContentTypeJSON {
		return encJSON, nil
	}
	if v == ContentTypeRow {
		return encRow, nil
	}
	if v != d.lastCT {
		d.lastEnc, d.lastErr = parseContentType(v)
		d.lastCT = v
	}
	return d.lastEnc, d.lastErr
}

// NewDecoder returns a decoder for schema s accepting values of at most
// maxBytes (DefaultMaxBytes if <= 0).
func NewDecoder(s *transform.Schema, maxBytes int) *Decoder {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	d := &Decoder{schema: s, maxBytes: maxBytes, fp: fingerprintPrefix(s),
		vals: make([]value, len(s.Fields)), seen: make([]bool, len(s.Fields)),
		index: map[string]int{}, idCol: -1, timeCol: -1}
	for i, f := range s.Fields {
		d.types = append(d.types, f.Type)
		d.index[f.Name] = i
		switch f.Name {
		case transform.ColEventID:
			d.idCol = i
		case transform.ColEventTime:
			d.timeCol = i
		}
	}
	d.jd = jsontext.NewDecoder(&d.jr)
	return d
}

// Reasons a record is malformed, a fixed set: metrics count dead letters by
// them, and ingestion sends the reason with each (the error's text says what
// exactly is wrong).
const (
	// ReasonOversized: larger than the decoder's maximum.
	ReasonOversized = "oversized"
	// ReasonContentType: a content type that is not a media type, names
	// neither encoding, or a charset other than UTF-8.
	ReasonContentType = "content_type"
	// ReasonSyntax: not a JSON object or not a row value (bad bytes,
	// truncated, trailing data).
	ReasonSyntax = "syntax"
	// ReasonSchema: well-formed but not the schema's: a missing, unknown or
	// repeated column, a value of the wrong type, a null event_id or
	// event_time, a row written for another schema; an update naming no
	// column to overwrite, a delete naming more than the event.
	ReasonSchema = "schema"
	// ReasonKind: a sig-kind header naming no kind.
	ReasonKind = "kind"
)

// Reasons is every reason code a decoding error can carry.
var Reasons = []string{ReasonOversized, ReasonContentType, ReasonSyntax, ReasonSchema, ReasonKind}

// Error is a decoding error: it wraps ErrMalformed and carries its reason.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	msg    string
}

func (e *Error) Error() string { return ErrMalformed.Error() + ": " + e.msg }

// Unwrap makes errors.Is(err, ErrMalformed) hold.
func (e *Error) Unwrap() error { return ErrMalformed }

// ReasonOf returns the reason of a decoding error ("" if err is not one).
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func malformed(reason, format string, args ...any) error {
	return &Error{Reason: reason, msg: fmt.Sprintf(format, args...)}
}

// Decode decodes one event record's value. contentType is the record's
// content-type header ("" means JSON; see ParseContentType).
func (d *Decoder) Decode(contentType string, b []byte) error {
	return d.DecodeKind(KindEvent, contentType, b)
}

// DecodeKind decodes one record value of kind k. An update or a delete is
// JSON only (a content type naming the row encoding is malformed,
// ReasonContentType): an update holds event_id, event_time and at least
// one other column, the values to overwrite; a delete holds event_id and
// event_time and nothing else. Has and Updated say which columns a decoded
// update holds.
func (d *Decoder) DecodeKind(k Kind, contentType string, b []byte) error {
	if len(b) > d.maxBytes {
		return malformed(ReasonOversized, "oversized: %d bytes, max %d", len(b), d.maxBytes)
	}
	enc, err := d.encodingOf(contentType)
	if err != nil {
		return err
	}
	d.kind = k
	switch {
	case k != KindEvent && enc == encRow:
		return malformed(ReasonContentType, "a %s record is JSON, not %s", k, ContentTypeRow)
	case enc == encRow:
		err = d.decodeRow(b)
		for i := range d.seen {
			d.seen[i] = true
		}
	default:
		err = d.decodeJSON(b, k)
	}
	if err != nil {
		return err
	}
	for _, c := range []int{d.idCol, d.timeCol} {
		if c >= 0 && d.vals[c].null {
			return malformed(ReasonSchema, "column %s is null", d.schema.Fields[c].Name)
		}
	}
	return nil
}

// EventID returns the decoded row's event_id (0 if the schema has none).
func (d *Decoder) EventID() int64 {
	if d.idCol < 0 {
		return 0
	}
	return d.vals[d.idCol].i
}

// EventTime returns the decoded row's event_time.
func (d *Decoder) EventTime() int64 {
	if d.timeCol < 0 {
		return 0
	}
	return d.vals[d.timeCol].i
}

// AppendTo appends the decoded row to b, whose fields are the schema's
// columns in order (a builder of transform.Schema.Arrow()). For an update,
// the columns it does not hold are appended as nulls (Has tells them
// apart).
func (d *Decoder) AppendTo(b *array.RecordBuilder) {
	for i, t := range d.types {
		v := &d.vals[i]
		fb := b.Field(i)
		if v.null || !d.seen[i] {
			fb.AppendNull()
			continue
		}
		switch t {
		case transform.Int64:
			fb.(*array.Int64Builder).Append(v.i)
		case transform.Float64:
			fb.(*array.Float64Builder).Append(v.f)
		case transform.String:
			fb.(*array.StringBuilder).BinaryBuilder.Append(v.s)
		case transform.ListString:
			lb := fb.(*array.ListBuilder)
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StringBuilder)
			for _, s := range v.ls {
				sb.BinaryBuilder.Append(s)
			}
		case transform.ListInt64:
			lb := fb.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).AppendValues(v.li, nil)
		}
	}
}

func (d *Decoder) decodeRow(b []byte) error {
	if len(b) < len(rowMagic)+8 || string(b[:len(rowMagic)]) != rowMagic {
		return malformed(ReasonSyntax, "not a %s value (bad magic)", ContentTypeRow)
	}
	if !bytes.Equal(b[len(rowMagic):len(rowMagic)+8], d.fp[:]) {
		return malformed(ReasonSchema, "written for another schema (fingerprint %x, want %x)", b[len(rowMagic):len(rowMagic)+8], d.fp)
	}
	p := b[len(rowMagic)+8:]
	for i, t := range d.types {
		name := d.schema.Fields[i].Name
		if len(p) == 0 {
			return malformed(ReasonSyntax, "truncated before column %s", name)
		}
		tag := p[0]
		p = p[1:]
		v := &d.vals[i]
		*v = value{ls: v.ls[:0], li: v.li[:0]}
		if tag == 0 {
			v.null = true
			continue
		}
		if tag != 1 {
			return malformed(ReasonSyntax, "column %s: bad tag %d", name, tag)
		}
		var n int
		switch t {
		case transform.Int64:
			v.i, n = binary.Varint(p)
			if n <= 0 {
				return malformed(ReasonSyntax, "column %s: bad varint", name)
			}
			p = p[n:]
		case transform.Float64:
			if len(p) < 8 {
				return malformed(ReasonSyntax, "column %s: truncated float64", name)
			}
			v.f = math.Float64frombits(binary.LittleEndian.Uint64(p))
			p = p[8:]
		case transform.String:
			v.s, p, n = rowString(p)
			if n < 0 {
				return malformed(ReasonSyntax, "column %s: bad string", name)
			}
		case transform.ListString:
			var cnt uint64
			if cnt, p, n = listLen(p); n < 0 {
				return malformed(ReasonSyntax, "column %s: bad list length", name)
			}
			for range cnt {
				var s []byte
				s, p, n = rowString(p)
				if n < 0 {
					return malformed(ReasonSyntax, "column %s: bad list element", name)
				}
				v.ls = append(v.ls, s)
			}
		case transform.ListInt64:
			var cnt uint64
			if cnt, p, n = listLen(p); n < 0 {
				return malformed(ReasonSyntax, "column %s: bad list length", name)
			}
			for range cnt {
				x, n := binary.Varint(p)
				if n <= 0 {
					return malformed(ReasonSyntax, "column %s: bad list element", name)
				}
				v.li = append(v.li, x)
				p = p[n:]
			}
		}
	}
	if len(p) != 0 {
		return malformed(ReasonSyntax, "%d trailing bytes", len(p))
	}
	return nil
}

// listLen reads a list's element count; n < 0 on error, among them a
// count above the bytes left (each element takes one at least), so that a
// bad count never makes the decoder loop or allocate for long.
func listLen(p []byte) (cnt uint64, rest []byte, n int) {
	cnt, n = binary.Uvarint(p)
	if n <= 0 || cnt > uint64(len(p)) {
		return 0, p, -1
	}
	return cnt, p[n:], n
}

// rowString reads a length-prefixed UTF-8 string; n < 0 on error.
func rowString(p []byte) (s, rest []byte, n int) {
	l, k := binary.Uvarint(p)
	if k <= 0 || l > uint64(len(p)-k) {
		return nil, p, -1
	}
	s = p[k : k+int(l)]
	if !utf8.Valid(s) {
		return nil, p, -1
	}
	return s, p[k+int(l):], 0
}

func (d *Decoder) decodeJSON(b []byte, k Kind) (err error) {
	d.jr.Reset(b)
	d.jd.Reset(&d.jr)
	d.scratch = d.scratch[:0]
	clear(d.seen)
	tok, err := d.jd.ReadToken()
	if err != nil {
		return malformed(ReasonSyntax, "not JSON: %v", err)
	}
	if tok.Kind() != '{' {
		return malformed(ReasonSyntax, "not a JSON object")
	}
	for {
		tok, err := d.jd.ReadToken()
		if err != nil {
			return malformed(ReasonSyntax, "not JSON: %v", err)
		}
		if tok.Kind() == '}' {
			break
		}
		name := tok.String()
		i, ok := d.index[name]
		if !ok {
			return malformed(ReasonSchema, "unknown column %q", name)
		}
		if d.seen[i] {
			return malformed(ReasonSchema, "column %s appears twice", name)
		}
		d.seen[i] = true
		if err := d.jsonValue(i); err != nil {
			return err
		}
	}
	if _, err := d.jd.ReadToken(); err == nil {
		return malformed(ReasonSyntax, "trailing data after the object")
	}
	others := 0
	for i, ok := range d.seen {
		key := i == d.idCol || i == d.timeCol
		switch {
		case !ok && (k == KindEvent || key):
			return malformed(ReasonSchema, "missing column %s", d.schema.Fields[i].Name)
		case ok && !key:
			others++
		}
	}
	switch {
	case k == KindUpdate && others == 0:
		return malformed(ReasonSchema, "an update names no column to overwrite (only %s and %s)", transform.ColEventID, transform.ColEventTime)
	case k == KindDelete && others > 0:
		return malformed(ReasonSchema, "a delete holds %s and %s only, not %d other columns", transform.ColEventID, transform.ColEventTime, others)
	}
	return nil
}

// Kind is the kind of the last decoded record.
func (d *Decoder) Kind() Kind { return d.kind }

// Has reports whether the last decoded record holds column i (schema
// order): every column for an event, the named ones for an update.
func (d *Decoder) Has(i int) bool { return d.seen[i] }

// Updated lists the columns a decoded update overwrites, in schema order
// (not event_id and event_time, which name the event).
func (d *Decoder) Updated() []string {
	var out []string
	for i, ok := range d.seen {
		if ok && i != d.idCol && i != d.timeCol {
			out = append(out, d.schema.Fields[i].Name)
		}
	}
	return out
}

func (d *Decoder) jsonValue(i int) error {
	name := d.schema.Fields[i].Name
	t := d.types[i]
	v := &d.vals[i]
	*v = value{ls: v.ls[:0], li: v.li[:0]}
	tok, err := d.jd.ReadToken()
	if err != nil {
		return malformed(ReasonSyntax, "column %s: %v", name, err)
	}
	if tok.Kind() == 'n' {
		v.null = true
		return nil
	}
	wrong := func(k jsontext.Kind) error {
		return malformed(ReasonSchema, "column %s: want %s, got JSON %s", name, t, k)
	}
	switch t {
	case transform.Int64:
		if tok.Kind() != '0' {
			return wrong(tok.Kind())
		}
		x, err := strconv.ParseInt(tok.String(), 10, 64)
		if err != nil {
			return malformed(ReasonSchema, "column %s: %q is not an int64", name, tok.String())
		}
		v.i = x
	case transform.Float64:
		if tok.Kind() != '0' {
			return wrong(tok.Kind())
		}
		v.f = tok.Float()
	case transform.String:
		if tok.Kind() != '"' {
			return wrong(tok.Kind())
		}
		v.s = d.keep(tok.String())
	case transform.ListString, transform.ListInt64:
		if tok.Kind() != '[' {
			return wrong(tok.Kind())
		}
		for {
			el, err := d.jd.ReadToken()
			if err != nil {
				return malformed(ReasonSyntax, "column %s: %v", name, err)
			}
			if el.Kind() == ']' {
				break
			}
			if t == transform.ListString {
				if el.Kind() != '"' {
					return malformed(ReasonSchema, "column %s: list element is JSON %s, want string", name, el.Kind())
				}
				v.ls = append(v.ls, d.keep(el.String()))
				continue
			}
			if el.Kind() != '0' {
				return malformed(ReasonSchema, "column %s: list element is JSON %s, want int64", name, el.Kind())
			}
			x, err := strconv.ParseInt(el.String(), 10, 64)
			if err != nil {
				return malformed(ReasonSchema, "column %s: list element %q is not an int64", name, el.String())
			}
			v.li = append(v.li, x)
		}
	}
	return nil
}

// keep copies s into the decoder's scratch and returns the copy's bytes.
func (d *Decoder) keep(s string) []byte {
	if cap(d.scratch)-len(d.scratch) < len(s) {
		// A fresh slab: earlier values keep pointing into the old one.
		d.scratch = make([]byte, 0, max(4096, 2*len(s)))
	}
	start := len(d.scratch)
	d.scratch = append(d.scratch, s...)
	return d.scratch[start:len(d.scratch):len(d.scratch)]
}
