package record_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/record"
)

func testSchema() *transform.Schema {
	return &transform.Schema{Source: "t", Fields: []transform.Field{
		{Name: "event_id", Type: transform.Int64},
		{Name: "event_time", Type: transform.Int64},
		{Name: "q", Type: transform.String},
		{Name: "p", Type: transform.Float64},
		{Name: "tags", Type: transform.ListString},
		{Name: "ids", Type: transform.ListInt64},
	}}
}

func encode(t *testing.T, ct string, fill func(e *record.Encoder)) []byte {
	t.Helper()
	e, err := record.NewEncoder(testSchema(), ct)
	if err != nil {
		t.Fatal(err)
	}
	e.Begin()
	fill(e)
	return e.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, ct := range []string{record.ContentTypeRow, record.ContentTypeJSON} {
		s := testSchema()
		b := array.NewRecordBuilder(memory.DefaultAllocator, s.Arrow())
		d := record.NewDecoder(s, 0)
		v1 := encode(t, ct, func(e *record.Encoder) {
			e.Int64(-7)
			e.Int64(1 << 60)
			e.String("héllo \"quoted\"\n")
			e.Float64(0.1)
			e.StringList([]string{"a", "", "ü"})
			e.Int64List([]int64{1, -2, 1 << 62})
		})
		v2 := encode(t, ct, func(e *record.Encoder) {
			e.Int64(8)
			e.Int64(9)
			e.Null()
			e.Null()
			e.StringList(nil)
			e.Null()
		})
		for _, v := range [][]byte{v1, v2} {
			if err := d.Decode(ct, v); err != nil {
				t.Fatalf("%s: %v (%q)", ct, err, v)
			}
			d.AppendTo(b)
		}
		if err := d.Decode(ct, v1); err != nil || d.EventID() != -7 || d.EventTime() != 1<<60 {
			t.Fatalf("%s: event id/time %d %d", ct, d.EventID(), d.EventTime())
		}
		rec := b.NewRecord()
		got := rec.Column(2).(*array.String).Value(0) + "|" + rec.Column(4).(*array.List).ListValues().(*array.String).Value(2)
		if got != "héllo \"quoted\"\n|ü" || !rec.Column(3).IsNull(1) || rec.Column(3).(*array.Float64).Value(0) != 0.1 ||
			rec.Column(5).(*array.List).ListValues().(*array.Int64).Value(2) != 1<<62 || !rec.Column(5).IsNull(1) {
			t.Fatalf("%s: decoded %v", ct, rec)
		}
		rec.Release()
		b.Release()
	}
}

// minimalRow is a record of testSchema in the row encoding: event 1 at
// time 2, q "x", p 1, empty lists.
func minimalRow(t *testing.T) []byte {
	return encode(t, record.ContentTypeRow, func(e *record.Encoder) {
		e.Int64(1)
		e.Int64(2)
		e.String("x")
		e.Float64(1)
		e.StringList(nil)
		e.Int64List(nil)
	})
}

func TestMalformed(t *testing.T) {
	full := `"event_time":2,"q":"x","p":1.5,"tags":["a"],"ids":[1]`
	row := minimalRow(t)
	other, _ := record.NewEncoder(transform.AdsSchema(), record.ContentTypeRow)
	other.Begin()
	for range transform.AdsSchema().Fields {
		other.Int64(1)
	}
	const (
		syntax = record.ReasonSyntax
		schema = record.ReasonSchema
	)
	cases := []struct {
		name, ct, value, reason, code string
	}{
		{"not json", "", `{"event_id":`, "unexpected EOF", syntax},
		{"array", "", `[1,2]`, "not a JSON object", syntax},
		{"missing", "", `{"event_id":1,"event_time":2}`, "missing column q", schema},
		{"unknown", "", `{"event_id":1,"zzz":3,` + full + `}`, "unknown column", schema},
		{"string for int", "", `{"event_id":"1",` + full + `}`, "want int64", schema},
		{"fraction for int", "", `{"event_id":1.5,` + full + `}`, "not an int64", schema},
		{"overflow", "", `{"event_id":99999999999999999999,` + full + `}`, "not an int64", schema},
		{"null id", "", `{"event_id":null,` + full + `}`, "event_id is null", schema},
		{"list of ints for strings", "", `{"event_id":1,"event_time":2,"q":"x","p":1,"tags":[1],"ids":[1]}`, "want string", schema},
		{"object for string", "", `{"event_id":1,"event_time":2,"q":{},"p":1,"tags":[],"ids":[]}`, "want string", schema},
		{"trailing", "", `{"event_id":1,` + full + `} {}`, "trailing", syntax},
		{"bad utf8", "", "{\"event_id\":1,\"event_time\":2,\"q\":\"\xff\",\"p\":1,\"tags\":[],\"ids\":[]}", "invalid UTF-8", syntax},
		{"oversized", "", `{"event_id":1,"q":"` + strings.Repeat("x", 70000) + `"}`, "oversized", record.ReasonOversized},
		{"bad content type", "text/csv", `1,2`, "content-type", record.ReasonContentType},
		{"row truncated", record.ContentTypeRow, string(row[:len(row)-2]), "truncated", syntax},
		{"row trailing", record.ContentTypeRow, string(row) + "x", "trailing", syntax},
		{"row magic", record.ContentTypeRow, "XX" + string(row[2:]), "magic", syntax},
		{"row other schema", record.ContentTypeRow, string(other.Bytes()), "another schema", schema},
		{"row as json", "", string(row), "not JSON", syntax},
	}
	d := record.NewDecoder(testSchema(), 0)
	for _, c := range cases {
		err := d.Decode(c.ct, []byte(c.value))
		if !errors.Is(err, record.ErrMalformed) || !strings.Contains(err.Error(), c.reason) || record.ReasonOf(err) != c.code {
			t.Errorf("%s: %v (reason %q), want ErrMalformed containing %q, reason %q", c.name, err, record.ReasonOf(err), c.reason, c.code)
		}
	}
	if err := d.Decode("", []byte(`{"event_id":1,`+full+`}`)); err != nil {
		t.Fatalf("valid JSON rejected: %v", err)
	}
}

// Content types are media types: parameters, any case of type and subtype,
// and a charset only if it is UTF-8.
func TestContentTypes(t *testing.T) {
	js := `{"event_id":1,"event_time":2,"q":"x","p":1.5,"tags":["a"],"ids":[1]}`
	row := string(minimalRow(t))
	cases := []struct {
		ct, value, want string // want: the media type, or part of the error
	}{
		{"", js, record.ContentTypeJSON},
		{"application/json", js, record.ContentTypeJSON},
		{"application/json; charset=utf-8", js, record.ContentTypeJSON},
		{"application/json;charset=UTF-8", js, record.ContentTypeJSON},
		{"Application/JSON; Charset=\"utf-8\"", js, record.ContentTypeJSON},
		{"application/json; profile=ads", js, record.ContentTypeJSON},
		{"application/vnd.sig.row.v1", row, record.ContentTypeRow},
		{"APPLICATION/VND.SIG.ROW.V1 ; charset=utf-8", row, record.ContentTypeRow},
		{"application/json; charset=iso-8859-1", js, `charset "iso-8859-1" is not supported`},
		{"application/json; charset=utf-16", js, `charset "utf-16" is not supported`},
		{"text/csv", js, "unknown content-type"},
		{"application/json; charset", js, "not a media type"},
		{";", js, "not a media type"},
	}
	d := record.NewDecoder(testSchema(), 0)
	for _, c := range cases {
		// Twice: the decoder remembers the last parsed content type.
		for range 2 {
			mt, perr := record.ParseContentType(c.ct)
			err := d.Decode(c.ct, []byte(c.value))
			if strings.Contains(c.want, "/") {
				if perr != nil || err != nil || mt != c.want {
					t.Errorf("%q: media type %q, %v; decode: %v; want %s", c.ct, mt, perr, err, c.want)
				}
				continue
			}
			if !errors.Is(err, record.ErrMalformed) || !strings.Contains(err.Error(), c.want) || perr == nil || perr.Error() != err.Error() ||
				record.ReasonOf(err) != record.ReasonContentType {
				t.Errorf("%q: decode %v, parse %v; want ErrMalformed containing %q", c.ct, err, perr, c.want)
			}
		}
	}
	for _, h := range []string{"content-type", "Content-Type", "CONTENT-TYPE"} {
		if !record.IsContentTypeHeader(h) {
			t.Errorf("%q is not taken for the content-type header", h)
		}
	}
	if record.IsContentTypeHeader("content-types") {
		t.Error("content-types taken for the content-type header")
	}
}

// TestKinds: the sig-kind header's values, in any case, and what an update
// and a delete may hold.
func TestKinds(t *testing.T) {
	for v, want := range map[string]record.Kind{"": record.KindEvent, "event": record.KindEvent, "UPDATE": record.KindUpdate,
		"Delete": record.KindDelete} {
		if k, err := record.ParseKind(v); err != nil || k != want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", v, k, err, want)
		}
	}
	if _, err := record.ParseKind("upsert"); !errors.Is(err, record.ErrMalformed) || record.ReasonOf(err) != record.ReasonKind ||
		!strings.Contains(err.Error(), `"upsert"`) {
		t.Errorf("ParseKind(upsert) = %v (reason %q)", err, record.ReasonOf(err))
	}
	if !record.IsKindHeader("SIG-Kind") {
		t.Error("the kind header's name is case-sensitive")
	}

	d := record.NewDecoder(testSchema(), 0)
	if err := d.DecodeKind(record.KindUpdate, "", []byte(`{"p":2.5,"event_time":2,"event_id":7,"tags":null}`)); err != nil {
		t.Fatal(err)
	}
	if d.Kind() != record.KindUpdate || d.EventID() != 7 || d.EventTime() != 2 || !reflect.DeepEqual(d.Updated(), []string{"p", "tags"}) ||
		d.Has(2) || !d.Has(3) {
		t.Fatalf("update: kind %v id %d time %d updated %v", d.Kind(), d.EventID(), d.EventTime(), d.Updated())
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema().Arrow())
	d.AppendTo(b)
	rec := b.NewRecord()
	if !rec.Column(2).IsNull(0) || rec.Column(3).(*array.Float64).Value(0) != 2.5 || !rec.Column(4).IsNull(0) {
		t.Fatalf("update appended as %v", rec)
	}
	rec.Release()
	b.Release()
	if err := d.DecodeKind(record.KindDelete, "application/json; charset=utf-8", []byte(`{"event_id":7,"event_time":2}`)); err != nil ||
		d.Kind() != record.KindDelete || d.EventID() != 7 || len(d.Updated()) != 0 {
		t.Fatalf("delete: %v, updated %v", err, d.Updated())
	}
	if err := d.DecodeKind(record.KindEvent, record.ContentTypeRow, minimalRow(t)); err != nil || d.Kind() != record.KindEvent || !d.Has(5) {
		t.Fatalf("event after a delete: %v", err)
	}
	for _, c := range []struct {
		name   string
		k      record.Kind
		ct     string
		value  string
		reason string
		code   string
	}{
		{"update of nothing", record.KindUpdate, "", `{"event_id":1,"event_time":2}`, "names no column", record.ReasonSchema},
		{"update without time", record.KindUpdate, "", `{"event_id":1,"p":2}`, "missing column event_time", record.ReasonSchema},
		{"update without id", record.KindUpdate, "", `{"event_time":1,"p":2}`, "missing column event_id", record.ReasonSchema},
		{"update of an unknown column", record.KindUpdate, "", `{"event_id":1,"event_time":2,"zz":1}`, "unknown column", record.ReasonSchema},
		{"update with a wrong type", record.KindUpdate, "", `{"event_id":1,"event_time":2,"p":"x"}`, "want float64", record.ReasonSchema},
		{"update null id", record.KindUpdate, "", `{"event_id":null,"event_time":2,"p":1}`, "event_id is null", record.ReasonSchema},
		{"delete with columns", record.KindDelete, "", `{"event_id":1,"event_time":2,"q":"x"}`, "a delete holds", record.ReasonSchema},
		{"delete without id", record.KindDelete, "", `{"event_time":2}`, "missing column event_id", record.ReasonSchema},
		{"row update", record.KindUpdate, record.ContentTypeRow, string(minimalRow(t)), "is JSON", record.ReasonContentType},
		{"row delete", record.KindDelete, record.ContentTypeRow, string(minimalRow(t)), "is JSON", record.ReasonContentType},
	} {
		err := d.DecodeKind(c.k, c.ct, []byte(c.value))
		if !errors.Is(err, record.ErrMalformed) || !strings.Contains(err.Error(), c.reason) || record.ReasonOf(err) != c.code {
			t.Errorf("%s: %v (reason %q), want ErrMalformed containing %q, reason %q", c.name, err, record.ReasonOf(err), c.reason, c.code)
		}
	}
}
