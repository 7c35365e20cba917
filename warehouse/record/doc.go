// Package record is the format of raw events on Kafka (topics raw.<source>):
// how producers encode one event as one Kafka record, and how ingestion
// decodes and validates it against the source's schema (transform.Schema).
//
// A record's value is one event. Its content-type header selects the
// encoding; a record without the header is JSON. The header's name is matched
// without regard to case ("Content-Type" works), and its value is a media type
// parsed as RFC 2045 says (ParseContentType): type and subtype in any case,
// parameters after ';'. A charset parameter must be utf-8 (in any case), the
// only encoding of record strings; "application/json; charset=utf-8" is JSON,
// "application/json; charset=iso-8859-1" is malformed. Other parameters are
// ignored.
//
// # JSON (content-type: application/json)
//
// One JSON object keyed by column name, holding exactly the schema's
// columns, in any order:
//
//	{"event_id": 17, "event_time": 1767225600000000, "query": "red shoes",
//	 "ad_title": "Red running shoes", "ad_category": "apparel",
//	 "advertiser_id": 42, "country": "us", "device": "mobile",
//	 "bid_price": 0.35, "click": 1, "conversion": 0}
//
// event_time is in microseconds since the Unix epoch; ingestion takes events
// from 1970 to the end of year 9999 and at most an hour (by default) ahead of
// its clock, and dead-letters others (warehouse/ingest).
//
// int64 columns take JSON integers (no fraction or exponent, within int64);
// float64 columns take any JSON number; string columns take strings (valid
// UTF-8); list<string> and list<int64> take arrays of those. null is allowed
// for every column except event_id and event_time. A missing column, an
// unknown or repeated key, a wrong type, trailing data, or a value that is not
// an object makes the record malformed. This is the interoperable encoding
// for producers outside SIG.
//
// # Row (content-type: application/vnd.sig.row.v1)
//
// A compact binary encoding, used by the generator by default because JSON
// decoding costs several times more CPU than the rest of ingestion:
//
//	"SR" 0x01                      magic and version
//	8 bytes                        first 8 bytes of the schema fingerprint
//	per column, in schema order:   0x00 (null) or 0x01 followed by the value
//	  int64                        zig-zag varint
//	  float64                      8 bytes, IEEE 754 little endian
//	  string                       uvarint length, UTF-8 bytes
//	  list<string>                 uvarint count, then strings as above
//	  list<int64>                  uvarint count, then zig-zag varints
//
// The fingerprint prefix makes a record written for another schema (or
// another version of this one) malformed instead of misread. Trailing bytes
// are malformed.
//
// # Kinds (header sig-kind)
//
// A record's sig-kind header (name and value in any case; absent or empty:
// event) says what it does (ParseKind; an unknown value is malformed,
// reason "kind"):
//
//   - event: adds an event, encoded as above. One whose event-time window
//     ingestion has already closed is a late event; it is appended to the
//     stored data of its window (warehouse/ingest).
//   - update: overwrites columns of a stored event, e.g. a conversion label
//     arriving hours after the impression. JSON only: event_id and
//     event_time (which name the event and are never overwritten) and at
//     least one other column, the new values (null allowed), nothing else:
//     {"event_id": 17, "event_time": 1767225600000000, "conversion": 1}
//   - delete: removes a stored event, e.g. one later flagged as spam. JSON
//     only, exactly event_id and event_time:
//     {"event_id": 17, "event_time": 1767225600000000}
//
// The row encoding stays the events' (an update or delete with content type
// application/vnd.sig.row.v1 is malformed, reason content_type): changes
// are rare next to events, and JSON names the columns an update holds. A
// producer keys an update or delete as it keyed the event (so it lands on
// the event's partition); it applies to the event with that event_id in the
// partition and event_time's window, and one that names no stored event is
// dead-lettered by ingestion (reason unknown_event).
//
// # Size
//
// A record whose value is larger than the decoder's maximum (DefaultMaxBytes,
// 64 KiB, unless configured) is malformed ("oversized"), whatever its
// encoding.
//
// # From Arrow files
//
// Encoder.Row encodes one row of an Arrow record of the schema's columns
// and types (transform.Conform's output, which converts any producer's
// encoding once), as `sigctl produce` does for a raw Arrow file. A list
// with a null element has no record form and is an error.
//
// Every decoding error wraps ErrMalformed, says what is wrong and carries a
// reason code from a fixed set (Error.Reason, ReasonOf, Reasons: oversized,
// content_type, syntax, schema, kind); ingestion sends such records to the
// dead-letter topic with both, and counts them by code.
package record
