package matching

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The matching cache's key layout, format version 1: the one place that
// knows the bytes of its Pebble keys and of the values that are not JSON.
// Only the Cache's methods (cache.go and the files of each record kind)
// use it; testdata/layout.txt pins it (TestCacheLayout).
//
// Component keys are the 32 raw bytes of the Merkle key; names are
// validated to contain no byte below 0x20, so \x00 is a safe separator.
//
//	f                                     -> "1" (format version)
//	c <key32>                             -> JSON ComponentRecord
//	r <key32>                             -> last requested, int64 unix micros BE
//	u <key32> <client>\x00<pipeline>      -> "" (pipelines using the component)
//	b <key32> <memo block ref>            -> MemoEntry, binary (see encodeMemo)
//	p <client>\x00<pipeline>              -> JSON Pipeline
//	n <nodekey32> <key32>                 -> "" (components containing a node)
//	o <op>\x00 <key32>                    -> "" (components using an op)
//	k <column>\x00 <key32>                -> "" (components reading a column)
//	a <^unix nanos:8> <id>                -> JSON AuditEntry (evictions, newest first)
//	so <op class>                         -> JSON OpStat (workers' measured cost of an op)
//	sz <key32>                            -> JSON SizeStat (a memo node's measured output size)
//	m <pack object>\x00 <key32> <memo block ref> -> "" (the entries naming a pack)
//
// Covers (issue 20) extended format 1 compatibly: a pipeline input's JSON
// may carry a cover, memo nodes are components like any other (c, n, o, k,
// u and b keys under their node keys), and the s keys hold the insertion
// policy's statistics. A cache written before opens and serves as it did
// (its pipelines' inputs have no cover: whole components;
// TestCacheWrittenBeforeServes reads testdata/layout-v1.txt, the layout
// the code before covers wrote).
//
// Versioned blocks (issue 21) extended it compatibly too: a memo entry's
// block is a memo block ref, the block id for input version 1 (every entry
// written before) and "<id>.v<N>" for input version N >= 2 (versions.go).
//
// Packed memo objects (issue 28) extended it compatibly again: a ready
// entry may name a column of a pack (MemoEntry.Column, stored after Build
// only when set, so an entry of one component's object keeps its bytes),
// and every entry naming a pack has an m key under the pack's object key,
// written in the same batch as the entry (memoentries.go), so that the
// entries a pack serves are one prefix scan and a pack is deleted only
// when the last of them goes. A cache written before packs has no m keys
// and no columns, and serves as it did (TestCacheWrittenBeforePacksServes
// reads testdata/layout-v2.txt, frozen).
//
// The n, o and k prefixes and u are the search index (eviction and the web
// UI use it). Everything about one submit is written in one batch
// (Cache.RegisterPipeline).

const (
	pfxFormat    = 'f'
	pfxComponent = 'c'
	pfxRequested = 'r'
	pfxUser      = 'u'
	pfxMemo      = 'b'
	pfxPipeline  = 'p'
	pfxNode      = 'n'
	pfxOp        = 'o'
	pfxColumn    = 'k'
	pfxAudit     = 'a'
	pfxStats     = 's'
	pfxPack      = 'm'
)

// keyLen is the length of a component key in a Pebble key.
const keyLen = len(canon.Key{})

var formatKey = []byte{pfxFormat}

func key1(p byte, k canon.Key) []byte { return append([]byte{p}, k[:]...) }

func key2(p byte, k canon.Key, rest string) []byte {
	b := make([]byte, 0, 1+len(k)+len(rest))
	b = append(b, p)
	b = append(b, k[:]...)
	return append(b, rest...)
}

// componentKey is c<key32>; componentPrefix(prefix) is the span of the
// component records whose keys start with the given bytes.
func componentKey(k canon.Key) []byte { return key1(pfxComponent, k) }

func componentPrefix(keyPrefix []byte) []byte { return append([]byte{pfxComponent}, keyPrefix...) }

// requestedKey is r<key32>.
func requestedKey(k canon.Key) []byte { return key1(pfxRequested, k) }

// userKey is u<key32><client>\x00<pipeline>; userPrefix(k) spans k's users.
func userKey(k canon.Key, client, pipeline string) []byte {
	return key2(pfxUser, k, client+"\x00"+pipeline)
}

func userPrefix(k canon.Key) []byte { return key1(pfxUser, k) }

// decodeUser splits the rest of a user key after userPrefix into client and
// pipeline (ok=false without a separator).
func decodeUser(rest []byte) (client, pipeline string, ok bool) {
	for i, c := range rest {
		if c == 0 {
			return string(rest[:i]), string(rest[i+1:]), true
		}
	}
	return "", "", false
}

// memoKey is b<key32><block id>; memoPrefix(k) spans k's entries, memosPrefix
// every component's.
func memoKey(k canon.Key, block blockref.Memo) []byte { return key2(pfxMemo, k, block.String()) }

func memoPrefix(k canon.Key) []byte { return key1(pfxMemo, k) }

var memosPrefix = []byte{pfxMemo}

// decodeMemoKey returns the component and block of a memo key.
func decodeMemoKey(key []byte) (canon.Key, blockref.Memo) {
	return keyAt(key, 1), blockref.ParseMemo(string(key[1+keyLen:]))
}

// packMemberKey is m<object>\x00<key32><memo block ref>: entry (k, block)
// names a column of pack object (object keys hold no byte below 0x20,
// warehouse/block's validName); packPrefix(object) spans the entries
// naming it.
func packMemberKey(object string, k canon.Key, block blockref.Memo) []byte {
	b := packPrefix(object)
	b = append(b, k[:]...)
	return append(b, block.String()...)
}

func packPrefix(object string) []byte {
	b := make([]byte, 0, len(object)+2)
	b = append(b, pfxPack)
	b = append(b, object...)
	return append(b, 0)
}

// pipelineKey is p<client>\x00<pipeline>; pipelinePrefix(client) spans a
// client's pipelines, every pipeline when client is empty.
func pipelineKey(client, name string) []byte {
	return []byte(string(pfxPipeline) + client + "\x00" + name)
}

func pipelinePrefix(client string) []byte {
	if client == "" {
		return []byte{pfxPipeline}
	}
	return []byte(string(pfxPipeline) + client + "\x00")
}

// The search index: a key per (node, component), (op, component) and
// (column, component), the component key last, so that each prefix lists
// its components in key order.
func nodePrefix(n canon.Key) []byte { return key1(pfxNode, n) }

func opPrefix(op string) []byte { return []byte(string(pfxOp) + op + "\x00") }

func columnPrefix(col string) []byte { return []byte(string(pfxColumn) + col + "\x00") }

func indexKey(prefix []byte, k canon.Key) []byte {
	return append(append(make([]byte, 0, len(prefix)+keyLen), prefix...), k[:]...)
}

// auditKey is a<^unix nanos BE><id>: newest first.
func auditKey(when time.Time, id string) []byte {
	key := binary.BigEndian.AppendUint64([]byte{pfxAudit}, ^uint64(when.UnixNano()))
	return append(key, id...)
}

var auditPrefix = []byte{pfxAudit}

// opStatKey is so<op class>; opStatsPrefix spans every op's.
func opStatKey(class string) []byte { return []byte(string(pfxStats) + "o" + class) }

var opStatsPrefix = []byte{pfxStats, 'o'}

// sizeStatKey is sz<key32>.
func sizeStatKey(k canon.Key) []byte { return append([]byte{pfxStats, 'z'}, k[:]...) }

// keyAt returns the component key at b[off:].
func keyAt(b []byte, off int) canon.Key {
	var k canon.Key
	copy(k[:], b[off:])
	return k
}

// encodeRequested and decodeRequested: a last-requested time as int64 unix
// micros, big-endian.
func encodeRequested(at time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(at.UnixMicro()))
}

func decodeRequested(v []byte) (time.Time, bool) {
	if len(v) != 8 {
		return time.Time{}, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(v))), true
}

// encodeMemo: state byte, rows uvarint, bytes uvarint, updated micros
// varint, gen uvarint, object and error length-prefixed, then, when set,
// build and column length-prefixed.
func encodeMemo(e *MemoEntry) []byte {
	b := []byte{byte(e.State)}
	b = binary.AppendUvarint(b, uint64(e.Rows))
	b = binary.AppendUvarint(b, uint64(e.Bytes))
	b = binary.AppendVarint(b, e.Updated.UnixMicro())
	b = binary.AppendUvarint(b, e.Gen)
	b = binary.AppendUvarint(b, uint64(len(e.Object)))
	b = append(b, e.Object...)
	b = binary.AppendUvarint(b, uint64(len(e.Error)))
	b = append(b, e.Error...)
	if e.Build != "" || e.Column != "" {
		// Last and only when known: entries without one keep the bytes
		// they always had (testdata/layout.txt).
		b = binary.AppendUvarint(b, uint64(len(e.Build)))
		b = append(b, e.Build...)
	}
	if e.Column != "" {
		// After the build (empty or not), only for an entry naming a
		// pack's column: entries of one component's object keep their
		// bytes (testdata/layout-v2.txt).
		b = binary.AppendUvarint(b, uint64(len(e.Column)))
		b = append(b, e.Column...)
	}
	return b
}

// memoStateBytes decodes only a memo entry's state and object size, what
// Reuse counts, without the strings decodeMemo allocates.
func memoStateBytes(v []byte) (MemoState, int64, error) {
	if len(v) < 1 {
		return 0, 0, errors.New("corrupt")
	}
	_, n := binary.Uvarint(v[1:]) // rows
	if n <= 0 {
		return 0, 0, errors.New("corrupt")
	}
	size, m := binary.Uvarint(v[1+n:])
	if m <= 0 {
		return 0, 0, errors.New("corrupt")
	}
	return MemoState(v[0]), int64(size), nil
}

func decodeMemo(k canon.Key, block blockref.Memo, v []byte) (MemoEntry, error) {
	e := MemoEntry{Component: k, Block: block}
	// Built only when needed: formatting it on every decode was most of the
	// cost of reading memo entries.
	bad := func() error { return fmt.Errorf("memo entry %s/%s: corrupt", k.Short(), block) }
	if len(v) < 1 {
		return e, bad()
	}
	e.State = MemoState(v[0])
	v = v[1:]
	u := func() uint64 {
		x, n := binary.Uvarint(v)
		if n <= 0 {
			v = nil
			return 0
		}
		v = v[n:]
		return x
	}
	e.Rows = int64(u())
	e.Bytes = int64(u())
	t, n := binary.Varint(v)
	if n <= 0 {
		return e, bad()
	}
	v = v[n:]
	e.Updated = time.UnixMicro(t)
	e.Gen = u()
	s := func() (string, bool) {
		l := u()
		if v == nil || uint64(len(v)) < l {
			return "", false
		}
		out := string(v[:l])
		v = v[l:]
		return out, true
	}
	ok3, ok4 := true, true
	var ok1, ok2 bool
	e.Object, ok1 = s()
	e.Error, ok2 = s()
	if ok2 && len(v) > 0 {
		e.Build, ok3 = s()
	}
	if ok3 && len(v) > 0 {
		e.Column, ok4 = s()
	}
	if !ok1 || !ok2 || !ok3 || !ok4 || e.State < MemoPending || e.State > MemoFailed {
		return e, bad()
	}
	return e, nil
}
