package block

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sigdata/sig/canon"
)

// Key prefixes of the bucket layout (brief, "Warehouse").
const (
	RawPrefix        = "raw/"
	MemoPrefix       = "memo/"
	CheckpointPrefix = "checkpoints/"
	// Ext is the extension of block objects.
	Ext = ".arrow"
)

// validName reports whether s can be one path segment of a key: non-empty,
// no '/', no leading '.', printable ASCII only.
func validName(s string) bool {
	if s == "" || s[0] == '.' || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '/' || c == '\\' {
			return false
		}
	}
	return true
}

// ValidateName checks that s can be used as a source, component key, block
// id or pipeline name in an object key.
func ValidateName(what, s string) error {
	if !validName(s) {
		return fmt.Errorf("block: invalid %s %q (want 1-200 printable ASCII characters, no '/', not starting with '.')", what, s)
	}
	return nil
}

// RawKey is the object key of a raw block: raw/<source>/<id>.arrow.
func RawKey(source, id string) string { return RawPrefix + source + "/" + id + Ext }

// ObjectKeyVersion is the object key of version v of a raw block: version 1
// (and 0, which means 1) keeps RawKey, raw/<source>/<id>.arrow; version N>=2
// is raw/<source>/<id>.v<N>.arrow. Every version is a whole object; none is
// ever rewritten.
func ObjectKeyVersion(source, id string, v int64) string {
	if v <= 1 {
		return RawKey(source, id)
	}
	return RawPrefix + source + "/" + VersionedID(id, v) + Ext
}

// VersionedID is "<id>.v<N>" for version N>=2 and id for version 1: the name
// of a block version in object keys (raw and memo alike).
func VersionedID(id string, v int64) string {
	if v <= 1 {
		return id
	}
	return id + ".v" + strconv.FormatInt(v, 10)
}

// SplitVersionedID splits "<id>.v<N>" (N>=2, no leading zero) into id and N;
// anything else is a version-1 id.
func SplitVersionedID(s string) (id string, v int64) {
	i := strings.LastIndex(s, ".v")
	if i <= 0 {
		return s, 1
	}
	digits := s[i+2:]
	if digits == "" || digits[0] == '0' || len(digits) > 18 {
		return s, 1
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 2 {
		return s, 1
	}
	return s[:i], n
}

// ParseRawKeyVersion splits raw/<source>/<id>[.v<N>].arrow into source, id
// and version.
func ParseRawKeyVersion(key string) (source, id string, v int64, ok bool) {
	source, vid, ok := ParseRawKey(key)
	if !ok {
		return "", "", 0, false
	}
	id, v = SplitVersionedID(vid)
	return source, id, v, true
}

// MemoColumn is the name of the memoized column in a memo object; the object
// also holds event_id, row-aligned with its raw block.
const MemoColumn = "value"

// MemoKey is the object key of a component's memoized output for a block:
// memo/<component-key>/<id>.arrow, the key in hex. This is the one
// definition of the memo layout: the matching cache records it, workers
// write there and readers read there.
func MemoKey(k canon.Key, id string) string {
	return MemoComponentPrefix(k) + id + Ext
}

// MemoComponentPrefix is the prefix of every memo object of a component:
// memo/<component-key>/ (eviction lists it).
func MemoComponentPrefix(k canon.Key) string { return MemoPrefix + k.String() + "/" }

// CheckpointKey is the object key of a checkpoint file of a pipeline:
// checkpoints/<pipeline>/<name>. name may contain '/'.
func CheckpointKey(pipeline, name string) string {
	return CheckpointPrefix + pipeline + "/" + name
}

// ParseRawKey splits raw/<source>/<id>.arrow.
func ParseRawKey(key string) (source, id string, ok bool) {
	rest, ok := strings.CutPrefix(key, RawPrefix)
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, Ext)
	if !ok {
		return "", "", false
	}
	source, id, ok = strings.Cut(rest, "/")
	if !ok || !validName(source) || !validName(id) {
		return "", "", false
	}
	return source, id, true
}

// windowFormat renders window starts in block ids; windows are whole seconds.
const windowFormat = "20060102T150405Z"

// ID is the id of a raw block of the event-time window starting at
// windowStart (microseconds since the epoch) holding the records of Kafka
// partition r.Partition between offsets r.First and r.Last inclusive.
// Lexicographic order of ids is window order, then partition, then offset,
// for windows within the event times SIG stores ([transform.MinEventTime,
// transform.EndEventTime): four-digit years).
func ID(windowStart int64, r KafkaRange) string {
	w := time.UnixMicro(windowStart).UTC().Format(windowFormat)
	return fmt.Sprintf("%s-p%05d-%020d-%020d", w, r.Partition, r.First, r.Last)
}

// WindowPrefix is the prefix shared by the ids of every block of the window
// starting at windowStart; catalog range scans seek to it. Prefixes sort in
// time order only within [transform.MinEventTime, transform.EndEventTime):
// the year 10000's sorts before 2026's.
func WindowPrefix(windowStart int64) string {
	return time.UnixMicro(windowStart).UTC().Format(windowFormat)
}
