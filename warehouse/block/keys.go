package block

import (
	"fmt"
	"strings"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/warehouse/blockref"
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

// RawKey is the object key of raw block version r: version 1 is
// raw/<source>/<id>.arrow, version N >= 2 raw/<source>/<id>.v<N>.arrow
// (r.String(), the warehouse's name of the version). Every version is a
// whole object; none is ever rewritten.
func RawKey(source string, r blockref.Ref) string { return RawPrefix + source + "/" + r.String() + Ext }

// ParseRawKey splits raw/<source>/<id>[.v<N>].arrow into the source and
// the block version.
func ParseRawKey(key string) (source string, r blockref.Ref, ok bool) {
	rest, ok := strings.CutPrefix(key, RawPrefix)
	if !ok {
		return "", r, false
	}
	rest, ok = strings.CutSuffix(rest, Ext)
	if !ok {
		return "", r, false
	}
	source, name, ok := strings.Cut(rest, "/")
	if !ok || !validName(source) || !validName(name) {
		return "", r, false
	}
	return source, blockref.Parse(name), true
}

// MemoColumn is the name of the memoized column in a memo object; the object
// also holds event_id, row-aligned with its raw block.
const MemoColumn = "value"

// MemoKey is the object key of a component's memoized output for a block
// at an input version: memo/<component-key>/<id>[.v<N>].arrow, the key in
// hex (m.String()). This is the one definition of the memo layout: the
// matching cache records it, workers write there and readers read there.
func MemoKey(k canon.Key, m blockref.Memo) string {
	return MemoComponentPrefix(k) + m.String() + Ext
}

// ParseMemoKey splits memo/<component-key>/<id>[.v<N>].arrow into the
// component key and the memo block; ok is false for anything MemoKey does
// not write (so a key that parses prints back the same).
func ParseMemoKey(key string) (k canon.Key, m blockref.Memo, ok bool) {
	rest, ok := strings.CutPrefix(key, MemoPrefix)
	if !ok {
		return k, m, false
	}
	hex, name, ok := strings.Cut(rest, "/")
	if !ok {
		return k, m, false
	}
	if name, ok = strings.CutSuffix(name, Ext); !ok || !validName(name) {
		return k, m, false
	}
	k, err := canon.ParseKey(hex)
	if err != nil {
		return k, m, false
	}
	m = blockref.ParseMemo(name)
	if MemoKey(k, m) != key {
		return k, m, false
	}
	return k, m, true
}

// MemoComponentPrefix is the prefix of every memo object of a component:
// memo/<component-key>/ (eviction lists it).
func MemoComponentPrefix(k canon.Key) string { return MemoPrefix + k.String() + "/" }

// PackPrefix is the prefix of every pack (issue 28, pack.go):
// memo/packs/<source>/<raw block version>/<unique id>.arrow. "packs" is
// no component key, so no pack is under a MemoComponentPrefix.
const PackPrefix = MemoPrefix + "packs/"

// PackKey is the object key of pack id of raw block version raw of
// source.
func PackKey(source string, raw blockref.Ref, id string) string {
	return PackPrefix + source + "/" + raw.String() + "/" + id + Ext
}

// NewPackKey is a new pack's key: a random id (128 bits), so that a pack
// is never overwritten, whoever writes it and however often a task runs:
// a reader may keep a pack's footer by its key, and a crash leaves at most
// an object no memo entry names, which the evictor's sweep deletes.
func NewPackKey(source string, raw blockref.Ref) string {
	return PackKey(source, raw, randid.Hex(16))
}

// ParsePackKey splits a pack key into its source and raw block version;
// ok is false for anything PackKey does not write.
func ParsePackKey(key string) (source string, raw blockref.Ref, ok bool) {
	rest, ok := strings.CutPrefix(key, PackPrefix)
	if !ok {
		return "", raw, false
	}
	rest, ok = strings.CutSuffix(rest, Ext)
	if !ok {
		return "", raw, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || !validName(parts[0]) || !validName(parts[1]) || !validName(parts[2]) {
		return "", raw, false
	}
	raw = blockref.Parse(parts[1])
	if PackKey(parts[0], raw, parts[2]) != key {
		return "", raw, false
	}
	return parts[0], raw, true
}

// CheckpointKey is the object key of a checkpoint file of a pipeline:
// checkpoints/<pipeline>/<name>. name may contain '/'.
func CheckpointKey(pipeline, name string) string {
	return CheckpointPrefix + pipeline + "/" + name
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
