package transform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
)

// Type is the type of a column or of an op's output.
type Type uint8

// The types of the graph model (brief, "The transformation graph and the DSL").
const (
	TypeInvalid Type = iota
	String
	Int64
	Float64
	ListString
	ListInt64
)

var typeNames = [...]string{"invalid", "string", "int64", "float64", "list<string>", "list<int64>"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", t)
}

// IsList reports whether t is a list type.
func (t Type) IsList() bool { return t == ListString || t == ListInt64 }

// Elem returns the element type of a list type, or t itself for a scalar.
func (t Type) Elem() Type {
	switch t {
	case ListString:
		return String
	case ListInt64:
		return Int64
	}
	return t
}

// ListOf returns the list type whose elements are t (t must be String or Int64).
func ListOf(t Type) Type {
	switch t {
	case String, ListString:
		return ListString
	case Int64, ListInt64:
		return ListInt64
	}
	return TypeInvalid
}

// ParseType parses the textual form returned by Type.String.
func ParseType(s string) (Type, error) {
	for i, n := range typeNames {
		if i > 0 && n == s {
			return Type(i), nil
		}
	}
	return TypeInvalid, fmt.Errorf("unknown type %q (want one of string, int64, float64, list<string>, list<int64>)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ArrowType is the Arrow type used for columns of type t. Lists are Arrow
// List (32-bit offsets) of Utf8 or Int64; strings are Utf8.
func (t Type) ArrowType() arrow.DataType {
	switch t {
	case String:
		return arrow.BinaryTypes.String
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case ListString:
		return arrow.ListOf(arrow.BinaryTypes.String)
	case ListInt64:
		return arrow.ListOf(arrow.PrimitiveTypes.Int64)
	}
	return nil
}

// TypeOfArrow maps an Arrow type back to a graph type.
func TypeOfArrow(dt arrow.DataType) (Type, bool) {
	for _, t := range []Type{String, Int64, Float64, ListString, ListInt64} {
		if arrow.TypeEqual(dt, t.ArrowType()) {
			return t, true
		}
	}
	return TypeInvalid, false
}

// Field is one raw column of a source.
type Field struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

// Schema is the schema of a raw event source. Its fingerprint is part of
// every component key, so that a graph over a different source, or over a
// changed schema, never matches memoized data of another.
type Schema struct {
	Source string  `json:"source"`
	Fields []Field `json:"fields"`
}

// Column names of the built-in Ads event schema that every reader and the
// generator rely on.
const (
	ColEventID   = "event_id"
	ColEventTime = "event_time"
)

// The event times SIG stores and serves: [MinEventTime, EndEventTime)
// microseconds since the Unix epoch, from 1970-01-01T00:00:00Z up to, not
// including, 10000-01-01T00:00:00Z. Ingestion refuses a record whose
// event_time lies outside (CheckEventTime); a read range (SubmitGraph,
// GetReadSolution, a trainer's job) must lie within it.
//
// Why these bounds: block ids and the catalog's range walk start from a
// window's start written with a four-digit year (20260101T000000Z), whose
// string order is time order only up to 9999-12-31 (a five-digit year
// sorts before "2026…"); an impression before 1970 is a sentinel or a time
// in the wrong unit, not an event; and window arithmetic on times in this
// range (flooring to a window, adding a window length) stays far from
// int64 overflow.
const (
	MinEventTime int64 = 0                  // 1970-01-01T00:00:00Z, the first valid event time
	EndEventTime int64 = 253402300800000000 // 10000-01-01T00:00:00Z, the first invalid one after it
)

// CheckEventTime returns an error if t is outside [MinEventTime,
// EndEventTime), saying which bound it crosses.
func CheckEventTime(t int64) error {
	switch {
	case t < MinEventTime:
		return fmt.Errorf("event time %d is before %s, the earliest SIG stores", t, FormatMicros(MinEventTime))
	case t >= EndEventTime:
		return fmt.Errorf("event time %d is not before %s, the end of the event times SIG stores", t, FormatMicros(EndEventTime))
	}
	return nil
}

// FormatMicros writes microseconds since the epoch as an RFC 3339 UTC time
// (for messages).
func FormatMicros(t int64) string {
	return time.UnixMicro(t).UTC().Format(time.RFC3339Nano)
}

// AdsSchema returns the built-in Ads event schema (brief, "sigctl"): one row
// per ad impression. event_time is microseconds since the Unix epoch; click
// and conversion are 0/1 labels.
func AdsSchema() *Schema {
	return &Schema{Source: "ads", Fields: []Field{
		{ColEventID, Int64},
		{ColEventTime, Int64},
		{"query", String},
		{"ad_title", String},
		{"ad_category", String},
		{"advertiser_id", Int64},
		{"country", String},
		{"device", String},
		{"bid_price", Float64},
		{"click", Int64},
		{"conversion", Int64},
	}}
}

// Lookup returns the field called name.
func (s *Schema) Lookup(name string) (Field, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Validate checks that the schema is usable: a source name, unique non-empty
// field names, scalar or list types, and event_id/event_time as int64.
func (s *Schema) Validate() error {
	if s.Source == "" {
		return fmt.Errorf("schema: source is empty")
	}
	if len(s.Fields) == 0 {
		return fmt.Errorf("schema %q: no fields", s.Source)
	}
	seen := map[string]bool{}
	for i, f := range s.Fields {
		if f.Name == "" {
			return fmt.Errorf("schema %q: field %d has no name", s.Source, i)
		}
		if seen[f.Name] {
			return fmt.Errorf("schema %q: field %q appears twice", s.Source, f.Name)
		}
		seen[f.Name] = true
		if f.Type == TypeInvalid || f.Type.ArrowType() == nil {
			return fmt.Errorf("schema %q: field %q has invalid type", s.Source, f.Name)
		}
	}
	for _, name := range []string{ColEventID, ColEventTime} {
		if f, ok := s.Lookup(name); !ok || f.Type != Int64 {
			return fmt.Errorf("schema %q: field %q must exist with type int64", s.Source, name)
		}
	}
	return nil
}

// Fingerprint is a stable hash of the source name and the ordered fields.
func (s *Schema) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "sig.schema.v1\x00%s\x00", s.Source)
	for _, f := range s.Fields {
		fmt.Fprintf(h, "%s\x00%s\x00", f.Name, f.Type)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Arrow returns the Arrow schema of raw blocks of this source. event_id and
// event_time are non-nullable; every other column may hold nulls.
func (s *Schema) Arrow() *arrow.Schema {
	fs := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		fs[i] = arrow.Field{Name: f.Name, Type: f.Type.ArrowType(),
			Nullable: f.Name != ColEventID && f.Name != ColEventTime}
	}
	md := arrow.NewMetadata([]string{"sig.source", "sig.schema_fingerprint"}, []string{s.Source, s.Fingerprint()})
	return arrow.NewSchema(fs, &md)
}

// LoadSchema reads a JSON schema file:
//
//	{"source": "ads", "fields": [{"name": "event_id", "type": "int64"}, ...]}
//
// Unknown JSON fields are errors.
func LoadSchema(path string) (*Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSchema(b)
}

// ParseSchema parses the JSON form read by LoadSchema.
func ParseSchema(b []byte) (*Schema, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var s Schema
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}
