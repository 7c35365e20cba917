package reader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/prometheus/client_golang/prometheus"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// A unit's reads (issue 28, item 3: a small unit paid per request, not per
// byte). Every object a unit reads is read once, with one planned read
// (block.ObjectReader): the raw block for event_id, the labels, the raw
// columns the LOCAL inputs' residual reads and those the guard's sampled
// rows are computed from, all in one read (the guard's columns are part of
// the plan's raw columns, planGuard, so they are fetched once per unit
// however many inputs it guards); and each memo object once for all the
// inputs whose columns it holds (memoObjects). A planned read is one
// request when the object's footer is in the server's footer cache (the
// wanted segments coalesced into one range, unless they lie more than
// block.HoleLimit apart), and one request for an object of up to
// block.TailRead otherwise (the tail read holds it whole); a memo object
// of one component is one request either way (its value segment and
// footer read from where the raw block's event_id segment ends). So a
// unit of k memo inputs in one object is two requests, the raw block's and
// the object's, and a unit of k objects of one component each is 1 + k.
//
// The footer cache (Config.FooterCacheEntries) is what a stateless reader
// may keep: it only saves requests, and a footer found stale (an object
// written again under its key, as a repaired memo object is) is dropped
// and the object read again (warehouse/block, fetch.go). The raw block's
// footer is also what the memo reads check alignment with (block.SameSegment
// spares fetching a memo object's event ids): if the raw read had to drop
// a stale footer the memo reads already relied on, the unit is read again
// (errStaleRaw).

// memoRead is what one input (or memo node) reads of its memo object: the
// object's footer, the directory entry and segment of the input's column,
// and the object's event_id segment when the footers do not show it to be
// the raw block's (memoColumn compares it then).
type memoRead struct {
	meta  block.Meta
	col   block.Column
	value []byte
	ids   []byte
	err   error
}

// memoObject is one memo object a unit reads and the reads (indices in
// plan.reads) whose columns it holds.
type memoObject struct {
	key     string
	members []int
	// single: every member reads MemoColumn, the column of an object of
	// one component (the layout readers knew first): its value segment
	// starts where the raw block's event_id segment ends, and only the
	// footer follows it.
	single bool
}

// memoObjects groups the MEMO reads by the object they read, in the order
// of their first read.
func memoObjects(reads []inputPlan) []memoObject {
	var out []memoObject
	at := map[string]int{}
	for i, in := range reads {
		if in.mode != readerv1.InputMode_INPUT_MODE_MEMO {
			continue
		}
		j, ok := at[in.memo]
		if !ok {
			j = len(out)
			at[in.memo] = j
			out = append(out, memoObject{key: in.memo, single: true})
		}
		out[j].members = append(out[j].members, i)
		out[j].single = out[j].single && !in.packed
	}
	return out
}

// checkMemoMeta checks from its footer that a memo object holds what input
// in reads, of a raw block of rawRows rows (block.CheckMember, the check
// sigd verifies a reported object with): its column of a pack, or the
// value of an object of its component alone.
func checkMemoMeta(in inputPlan, meta block.Meta, rawRows int64) error {
	column := ""
	if in.packed {
		column = in.column
	}
	_, err := block.CheckMember(meta, column, in.component, in.memoBlock, in.typ.String(), rawRows)
	return err
}

// readMemoObject reads memo object o for its members, into memos (indexed
// as reads): each member's column, checked against its footer entry
// (checkMemoMeta; a member that fails it fails alone), and the object's
// event_id segment unless the footers show it is the raw block's, all in
// one planned read. An error of the read itself is every member's; the
// caller sets it.
func (s *Server) readMemoObject(ctx context.Context, reads []inputPlan, o memoObject, memos []memoRead, rawMeta block.Meta, alloc block.Alloc) error {
	checks := make([]error, len(o.members))
	var withIDs bool
	want := func(meta block.Meta, cached bool) ([]string, error) {
		names := make([]string, 0, len(o.members)+1)
		var first error
		for j, i := range o.members {
			in := reads[i]
			if checks[j] = checkMemoMeta(in, meta, rawMeta.Rows); checks[j] != nil {
				first = firstOf(first, checks[j])
				continue
			}
			names = append(names, in.column)
		}
		// A cached footer refused in part may be stale: refused whole, the
		// object is read again (block.ObjectRead.Want).
		if first != nil && (cached || len(names) == 0) {
			return nil, first
		}
		withIDs = s.cfg.ExactAlignment || !block.SameSegment(meta, rawMeta, transform.ColEventID)
		if withIDs {
			names = append(names, transform.ColEventID)
		}
		return names, nil
	}
	rd := block.ObjectRead{Key: o.key, Want: want, Alloc: alloc, Count: s.countMemo}
	if id, ok := rawMeta.Column(transform.ColEventID); ok && o.single && !s.cfg.ExactAlignment {
		rd.From = block.After(id)
	}
	d, err := s.objects.Read(ctx, rd)
	if err != nil {
		return err
	}
	s.requests.got(objectMemo, d)
	var ids []byte
	if withIDs {
		ids, _ = d.Segment(transform.ColEventID)
	}
	for j, i := range o.members {
		if checks[j] != nil {
			memos[i].err = checks[j]
			continue
		}
		col, _ := d.Meta.Column(reads[i].column)
		seg, _ := d.Segment(reads[i].column)
		memos[i] = memoRead{meta: d.Meta, col: col, value: seg, ids: ids}
	}
	return nil
}

// firstOf returns first if set, else err.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// errStaleRaw: the raw block's footer the memo reads relied on was not the
// one its columns were read with (a stale cached footer); load reads the
// unit again.
var errStaleRaw = errors.New("raw block footer changed during the read")

// sameColumn reports whether two footers have the same directory entry
// for column name.
func sameColumn(a, b block.Meta, name string) bool {
	ca, oka := a.Column(name)
	cb, okb := b.Column(name)
	return oka == okb && ca == cb
}

// rawRead is the raw block's columns the unit needs: event_id, then
// p.rawColumns; its footer and the event_id segment's bytes.
type rawRead struct {
	meta       block.Meta
	rec        arrow.Record
	eventIDSeg []byte
}

// readRaw reads event_id and p.rawColumns of the unit's raw block in one
// planned read, after checking its footer (checkRawMeta and the columns'
// types); footer is told the footer before any segment is fetched (and
// again if the read is made again from the object, a cached footer having
// been stale).
func (s *Server) readRaw(ctx context.Context, p *plan, alloc block.Alloc, footer func(block.Meta)) (*rawRead, error) {
	key := p.unit.RawObject
	names := append([]string{transform.ColEventID}, p.rawColumns...)
	fields := make([]arrow.Field, len(names))
	var refused error
	want := func(meta block.Meta, _ bool) ([]string, error) {
		refused = checkRawMeta(p, meta)
		for i, name := range names {
			if refused != nil {
				break
			}
			c, ok := meta.Column(name)
			f, _ := p.schema.Lookup(name)
			if !ok || c.Type != f.Type.String() {
				refused = fmt.Errorf("%w: raw block %s: column %q is %q in the footer, want %s of the schema",
					ErrCorrupt, key, name, c.Type, f.Type)
			}
			fields[i] = arrow.Field{Name: name, Type: f.Type.ArrowType(), Nullable: name != transform.ColEventID}
		}
		if refused != nil {
			return nil, refused
		}
		footer(meta)
		return names, nil
	}
	d, err := s.objects.Read(ctx, block.ObjectRead{Key: key, Want: want, Alloc: alloc, Count: s.countRaw})
	if err != nil {
		if err == refused {
			return nil, err // the reader's own error, naming what is wrong
		}
		return nil, rawErr(key, err)
	}
	s.requests.got(objectRaw, d)
	cols := make([]arrow.Array, len(names))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, name := range names {
		c, _ := d.Meta.Column(name)
		if cols[i], err = block.DecodeSegmentInto(key, c, d.Segs[i], d.Meta.Rows, alloc); err != nil {
			return nil, rawErr(key, err)
		}
	}
	if cols[0].NullN() != 0 {
		return nil, fmt.Errorf("%w: raw block %s: event_id has nulls", ErrCorrupt, key)
	}
	return &rawRead{meta: d.Meta, rec: array.NewRecord(arrow.NewSchema(fields, nil), cols, d.Meta.Rows), eventIDSeg: d.Segs[0]}, nil
}

// checkRawMeta checks that the raw block's footer is the block the unit
// names, of the unit's schema.
func checkRawMeta(p *plan, meta block.Meta) error {
	if meta.IsMemo() || meta.Ref() != p.raw {
		return fmt.Errorf("%w: raw object %s holds block %q version %d (memo: %t), not raw block %q version %d",
			ErrCorrupt, p.unit.RawObject, meta.ID, meta.Ref().Version(), meta.IsMemo(), p.raw.ID(), p.raw.Version())
	}
	if fp := p.schema.Fingerprint(); meta.SchemaFingerprint != fp {
		return invalid("raw_schema_json", "schema fingerprint %.12s differs from raw block %s's %.12s",
			fp, p.unit.BlockId, meta.SchemaFingerprint)
	}
	return nil
}

func rawErr(key string, err error) error {
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrNoBlock, key)
	case errors.Is(err, block.ErrCorrupt):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return fmt.Errorf("%w: reading raw block %s: %w", ErrStore, key, err)
}

// requestCounts count the object store requests of the server's planned
// reads, by object (raw block, memo object) and kind (MetricObjectRequests),
// and the bytes of the segments those reads wanted, by object
// (MetricObjectWantedBytes): what a read would fetch with no hole between
// its segments and no tail beyond them, the floor of the bytes the store
// sends for a unit at this layout (the store's own count of bytes sent
// is the rest: holes coalesced, tails read whole).
type requestCounts struct {
	n       [2][3]atomic.Int64
	fetched [2][3]atomic.Int64
	wanted  [2]atomic.Int64
}

const (
	objectRaw = iota
	objectMemo
)

var objectNames = [2]string{"raw", "memo"}

func (c *requestCounts) counter(object int) func(block.RequestKind, int64) {
	return func(k block.RequestKind, bytes int64) {
		c.n[object][k].Add(1)
		c.fetched[object][k].Add(bytes)
	}
}

// got adds the segments a read of object returned to the wanted bytes.
func (c *requestCounts) got(object int, d block.ObjectData) {
	var n int64
	for _, s := range d.Segs {
		n += int64(len(s))
	}
	c.wanted[object].Add(n)
}

func (c *requestCounts) total() int64 {
	var n int64
	for o := range c.n {
		for k := range c.n[o] {
			n += c.n[o][k].Load()
		}
	}
	return n
}

func (c *requestCounts) collect(ch chan<- prometheus.Metric) {
	for o := range c.n {
		for k := range c.n[o] {
			ch <- prometheus.MustNewConstMetric(descObjectRequests, prometheus.CounterValue, float64(c.n[o][k].Load()),
				objectNames[o], block.RequestKind(k).String())
			ch <- prometheus.MustNewConstMetric(descObjectFetchedBytes, prometheus.CounterValue, float64(c.fetched[o][k].Load()),
				objectNames[o], block.RequestKind(k).String())
		}
		ch <- prometheus.MustNewConstMetric(descObjectWantedBytes, prometheus.CounterValue, float64(c.wanted[o].Load()), objectNames[o])
	}
}
