package workers

// The queue's on-disk layout: the keys and the task record that the state
// (state.go) writes and restores, and the store (queue.go) puts in Pebble as
// they are. doc.go ("Persistence") describes the layout; it is the format
// FormatVersion names, so existing stores open with byte-identical keys.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// FormatVersion is the on-disk format of the queue store (see doc.go for the
// key layout). Open refuses a store with a different version, but for
// formatV1, which it upgrades in place.
const FormatVersion = "sig.workers/2"

// formatV1 is the format before worker builds (issue 27): /2 adds ban
// records and a leased task's build, so a /1 store is a /2 store as it is,
// while a binary of /1 would refuse the records /2 adds (it sees the
// version instead, ErrFormat).
const formatV1 = "sig.workers/1"

// Key prefixes; doc.go describes the layout.
const (
	pfxFormat     = 'v'
	pfxTask       = 't'
	pfxQueue      = 'q'
	pfxPipeline   = 'p'
	pfxLease      = 'l'
	pfxQuarantine = 'x'
	pfxFairness   = 'f'
	pfxBan        = 'b'
)

var keyFormat = []byte{pfxFormat}

// ---------------------------------------------------------------- keys
//
// Names never contain NUL (checkName), so NUL terminates them and keys of
// one prefix sort by their fields in order.

func appendName(k []byte, s string) []byte { return append(append(k, s...), 0) }

// appendID writes a task id as its component key's 64 lowercase hex digits
// (canon.Key.String, the form stores have always held), NUL, the block id.
func appendID(k []byte, id TaskID) []byte {
	return append(append(hex.AppendEncode(k, id.Component[:]), 0), id.Block.String()...)
}

// storedID is a task id as the store holds it (appendID). Every key of a
// task embeds it, so a task encodes its own once (task.sid) rather than at
// every write.
type storedID []byte

func storeID(id TaskID) storedID {
	return appendID(make([]byte, 0, keyHexLen+1+len(id.Block.ID())+20), id)
}

// keyHexLen is the length of a component key in a store key.
const keyHexLen = 2 * len(canon.Key{})

// parseKey reads a component key as appendID wrote it: exactly 64 lowercase
// hex digits, so that writing it back gives the same bytes.
func parseKey(b []byte) (canon.Key, bool) {
	var k canon.Key
	if len(b) != keyHexLen || bytes.ContainsAny(b, "ABCDEF") {
		return k, false
	}
	_, err := hex.Decode(k[:], b)
	return k, err == nil
}

// invPriority maps priorities so that higher priorities sort first.
func invPriority(p int32) uint32 { return ^(uint32(p) ^ 0x80000000) }

func fromInvPriority(u uint32) int32 { return int32(^u ^ 0x80000000) }

func taskKey(id storedID) []byte {
	return append(append(make([]byte, 0, 1+len(id)), pfxTask), id...)
}

func queueKey(client string, prio int32, seq uint64) []byte {
	k := appendName(append(make([]byte, 0, 14+len(client)), pfxQueue), client)
	k = binary.BigEndian.AppendUint32(k, invPriority(prio))
	return binary.BigEndian.AppendUint64(k, seq)
}

func pipelineKey(client, pipeline string, id storedID) []byte {
	k := append(make([]byte, 0, 3+len(client)+len(pipeline)+len(id)), pfxPipeline)
	return append(appendName(appendName(k, client), pipeline), id...)
}

func leaseKey(deadline time.Time, leaseID string) []byte {
	k := append(make([]byte, 0, 9+len(leaseID)), pfxLease)
	k = binary.BigEndian.AppendUint64(k, uint64(deadline.UnixNano()))
	return append(k, leaseID...)
}

func fairnessKey(prio int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{pfxFairness}, invPriority(prio))
}

func parseFairnessKey(k []byte) (int32, error) {
	if len(k) != 5 {
		return 0, fmt.Errorf("%w: malformed fairness key %q", ErrCorrupt, k)
	}
	return fromInvPriority(binary.BigEndian.Uint32(k[1:])), nil
}

// banKey is b<build>: a build refused leases (issue 27).
func banKey(build string) []byte { return append([]byte{pfxBan}, build...) }

const banVersion = 1

// encodeBan is a ban record: version, time (Unix ns), reason.
func encodeBan(b Ban) []byte {
	v := binary.AppendVarint([]byte{banVersion}, b.Since.UnixNano())
	return appendString(v, b.Reason)
}

func decodeBan(k, v []byte) (Ban, error) {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != banVersion {
		return Ban{}, fmt.Errorf("%w: ban record version %d", ErrFormat, ver)
	}
	b := Ban{Build: string(k[1:]), Since: time.Unix(0, d.varint()), Reason: d.string()}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err == nil && checkName("build", b.Build) != nil {
		d.err = fmt.Errorf("build %q", b.Build)
	}
	if d.err != nil {
		return Ban{}, fmt.Errorf("%w: ban record %q: %v", ErrCorrupt, k, d.err)
	}
	return b, nil
}

func quarantineKey(id storedID) []byte {
	return append(append(make([]byte, 0, 1+len(id)), pfxQuarantine), id...)
}

func parseID(b []byte) (TaskID, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return TaskID{}, fmt.Errorf("%w: malformed task id %q", ErrCorrupt, b)
	}
	k, ok := parseKey(b[:i])
	if !ok {
		return TaskID{}, fmt.Errorf("%w: task id %q: component key is not 64 lowercase hex digits", ErrCorrupt, b)
	}
	return TaskID{Component: k, Block: blockref.ParseMemo(string(b[i+1:]))}, nil
}

func parseQueueKey(k []byte) (client string, prio int32, seq uint64, err error) {
	k = k[1:]
	i := bytes.IndexByte(k, 0)
	if i < 0 || len(k)-i-1 != 12 {
		return "", 0, 0, fmt.Errorf("%w: malformed queue key %q", ErrCorrupt, k)
	}
	rest := k[i+1:]
	return string(k[:i]), fromInvPriority(binary.BigEndian.Uint32(rest)), binary.BigEndian.Uint64(rest[4:]), nil
}

func parsePipelineKey(k []byte) (client, pipeline string, id TaskID, err error) {
	parts := bytes.SplitN(k[1:], []byte{0}, 3)
	if len(parts) != 3 {
		return "", "", TaskID{}, fmt.Errorf("%w: malformed pipeline key %q", ErrCorrupt, k)
	}
	id, err = parseID(parts[2])
	return string(parts[0]), string(parts[1]), id, err
}

func parseLeaseKey(k []byte) (deadline time.Time, leaseID string, err error) {
	if len(k) < 10 {
		return time.Time{}, "", fmt.Errorf("%w: malformed lease key %q", ErrCorrupt, k)
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))), string(k[9:]), nil
}

// ------------------------------------------------------------ records

const recordVersion = 1

// record is the persistent part of a task (the value under its t key).
type record struct {
	state      State
	seq        uint64
	attempts   int
	since      time.Time
	err        string
	requesters []Requester
	// Set when leased.
	leaseID  string
	worker   string
	client   string
	priority int32
	deadline time.Time
	leasedAt time.Time
	// build is the leasing worker's build (issue 27), written after the
	// lease's other fields only when known, so that records of workers
	// that do not say stay as they were.
	build string
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func (r *record) encode() []byte {
	b := make([]byte, 0, 64+len(r.err)+32*len(r.requesters))
	b = append(b, recordVersion, byte(r.state))
	b = binary.AppendUvarint(b, r.seq)
	b = binary.AppendUvarint(b, uint64(r.attempts))
	b = binary.AppendVarint(b, r.since.UnixNano())
	b = appendString(b, r.err)
	b = binary.AppendUvarint(b, uint64(len(r.requesters)))
	for _, q := range r.requesters {
		b = appendString(b, q.Client)
		b = appendString(b, q.Pipeline)
		b = binary.AppendVarint(b, int64(q.Priority))
	}
	if r.state == StateLeased {
		b = appendString(b, r.leaseID)
		b = appendString(b, r.worker)
		b = appendString(b, r.client)
		b = binary.AppendVarint(b, int64(r.priority))
		b = binary.AppendVarint(b, r.deadline.UnixNano())
		b = binary.AppendVarint(b, r.leasedAt.UnixNano())
		if r.build != "" {
			b = appendString(b, r.build)
		}
	}
	return b
}

// decoder reads a record, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) uvarint() uint64 { return decodeVarint(d, binary.Uvarint) }

func (d *decoder) varint() int64 { return decodeVarint(d, binary.Varint) }

// decodeVarint reads one varint with dec (binary.Uvarint or binary.Varint).
func decodeVarint[T uint64 | int64](d *decoder, dec func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := dec(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func decodeRecord(b []byte) (*record, error) {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != recordVersion {
		return nil, fmt.Errorf("%w: task record version %d", ErrFormat, v)
	}
	r := &record{state: State(d.byte())}
	r.seq = d.uvarint()
	r.attempts = int(d.uvarint())
	r.since = time.Unix(0, d.varint())
	r.err = d.string()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errShort
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		r.requesters = append(r.requesters, Requester{Client: d.string(), Pipeline: d.string(), Priority: int32(d.varint())})
	}
	switch r.state {
	case StateQueued, StateQuarantined:
	case StateLeased:
		r.leaseID = d.string()
		r.worker = d.string()
		r.client = d.string()
		r.priority = int32(d.varint())
		r.deadline = time.Unix(0, d.varint())
		r.leasedAt = time.Unix(0, d.varint())
		if d.err == nil && len(d.b) > 0 {
			r.build = d.string()
		}
	default:
		if d.err == nil {
			d.err = fmt.Errorf("unknown state %d", r.state)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err == nil && len(r.requesters) == 0 {
		d.err = errors.New("no requesters")
	}
	// Requesters are kept sorted by client and pipeline, each once
	// (sortRequesters, findRequester): a task's place in each client's
	// queue is read from them in that order (clientPriorities).
	for i := 1; i < len(r.requesters) && d.err == nil; i++ {
		a, b := r.requesters[i-1], r.requesters[i]
		if a.Client > b.Client || (a.Client == b.Client && a.Pipeline >= b.Pipeline) {
			d.err = fmt.Errorf("requesters %s/%s and %s/%s out of order or repeated", a.Client, a.Pipeline, b.Client, b.Pipeline)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: task record: %v", ErrCorrupt, d.err)
	}
	return r, nil
}
