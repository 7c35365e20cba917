package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/record"
)

// bufferRows is loc.blk of the buffer's own (new) events.
const bufferRows = -1

// loc is where an event of a window is: row row of the buffer's stored
// block blk (an index into changes.stored), or of the buffer's own rows.
type loc struct{ blk, row int32 }

// changes are a buffer's updates and deletes: what they apply to and the
// values updates bring. The index of the window (stored, live) is loaded on
// the first change; a late buffer without changes looks up only the stored
// blocks, when it is sealed.
type changes struct {
	nchanges int
	loaded   bool
	// stored are the catalogued blocks of the buffer's partition and
	// window (newest versions, event order) written with this schema.
	stored []block.Meta
	// live maps every event id of the window, stored or buffered and not
	// deleted, to where it is.
	live map[int64]loc
	// ub holds one row per update: its values, nulls elsewhere; nupd rows.
	ub   *array.RecordBuilder
	nupd int32
	// over gives, per updated event, per column, the row of ub whose value
	// the event's column takes (-1: its own); later updates overwrite.
	over    map[loc][]int32
	deleted map[loc]bool
}

// retry runs op until it succeeds or ctx ends: the object store may be
// down for a while, and ingestion waits for it rather than failing.
func (in *Ingester) retry(ctx context.Context, what string, op func() error) error {
	for {
		err := op()
		if err == nil || ctx.Err() != nil {
			return err
		}
		in.cfg.Logger.Warn("ingest: "+what+" failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-in.cfg.Clock.After(time.Second):
		}
	}
}

// loadStored looks up the catalogued blocks of b's partition and window
// (b.stored), once. Blocks of another schema are left out: a change cannot
// apply to them, and late rows are not appended to them. A late buffer
// without updates or deletes needs no more than this when it is sealed.
func (in *Ingester) loadStored(ps *partState, b *buffer) error {
	if b.stored != nil || b.loaded {
		return nil
	}
	ms, err := in.cfg.Catalog.Range(in.cfg.Schema.Source, b.window, b.window+in.windowLen)
	if err != nil {
		return fmt.Errorf("ingest: blocks of window %s: %w", transform.FormatMicros(b.window), err)
	}
	b.stored = slices.DeleteFunc(ms, func(m block.Meta) bool {
		return m.Kafka == nil || m.Kafka.Topic != in.cfg.Topic || m.Kafka.Partition != ps.partition ||
			m.WindowStart != b.window || m.SchemaFingerprint != in.fp
	})
	if b.stored == nil {
		b.stored = []block.Meta{}
	}
	return nil
}

// loadWindow loads the index of b's partition and window for its updates
// and deletes: the catalogued blocks (loadStored) and where each event id
// is, which reads every stored block's event_id column.
func (in *Ingester) loadWindow(ctx context.Context, ps *partState, b *buffer) error {
	if b.loaded {
		return nil
	}
	if err := in.loadStored(ps, b); err != nil {
		return err
	}
	b.live = map[int64]loc{}
	for i, m := range b.stored {
		var rec arrow.Record
		if err := in.retry(ctx, "read "+m.Key, func() (err error) {
			rec, err = block.ReadColumns(ctx, in.cfg.Store, m, []string{transform.ColEventID})
			return err
		}); err != nil {
			return fmt.Errorf("ingest: read event ids of %s: %w", m.Key, err)
		}
		ids, ok := rec.Column(0).(*array.Int64)
		if !ok {
			rec.Release()
			return fmt.Errorf("ingest: block %s: event_id is %s", m.Key, rec.Column(0).DataType())
		}
		for r := range ids.Len() {
			b.live[ids.Value(r)] = loc{int32(i), int32(r)}
		}
		rec.Release()
	}
	for r, id := range b.ids {
		b.live[id] = loc{bufferRows, int32(r)}
	}
	b.over = map[loc][]int32{}
	b.deleted = map[loc]bool{}
	b.loaded = true
	return nil
}

// change applies the decoded update or delete to buffer b; false if it
// names no event the window holds (the caller dead-letters it).
func (in *Ingester) change(ctx context.Context, ps *partState, b *buffer, k record.Kind) (bool, error) {
	if err := in.loadWindow(ctx, ps, b); err != nil {
		return false, err
	}
	id := in.dec.EventID()
	l, ok := b.live[id]
	if !ok {
		return false, nil
	}
	b.nchanges++
	if k == record.KindDelete {
		b.deleted[l] = true
		delete(b.live, id)
		return true, nil
	}
	if b.ub == nil {
		b.ub = array.NewRecordBuilder(memory.DefaultAllocator, in.arrowSch)
	}
	in.dec.AppendTo(b.ub)
	u := b.nupd
	b.nupd++
	o := b.over[l]
	if o == nil {
		o = make([]int32, len(in.cfg.Schema.Fields))
		for i := range o {
			o[i] = -1
		}
		b.over[l] = o
	}
	for i, f := range in.cfg.Schema.Fields {
		if in.dec.Has(i) && f.Name != transform.ColEventID && f.Name != transform.ColEventTime {
			o[i] = u
		}
	}
	return true, nil
}

// rowRef is one row of a block being written: row row of source src, with
// the updates over (nil: none).
type rowRef struct {
	src  int
	row  int32
	over []int32
}

// materialize builds the record of refs' rows, in the schema's columns,
// from srcs (each holding the schema's columns, by name) and the update
// values ub. Consecutive rows of one source become one slice, so the cost
// is a copy of the rows plus one slice per change.
func (in *Ingester) materialize(srcs []arrow.Record, refs []rowRef, ub arrow.Record) (arrow.Record, error) {
	fields := in.arrowSch.Fields()
	idx := make([][]int, len(srcs))
	for s, rec := range srcs {
		idx[s] = make([]int, len(fields))
		for c, f := range fields {
			is := rec.Schema().FieldIndices(f.Name)
			if len(is) != 1 {
				return nil, fmt.Errorf("ingest: a block to change has no column %s", f.Name)
			}
			if t := rec.Column(is[0]).DataType(); !arrow.TypeEqual(t, f.Type) {
				return nil, fmt.Errorf("ingest: a block to change has column %s of type %s, want %s", f.Name, t, f.Type)
			}
			idx[s][c] = is[0]
		}
	}
	cols := make([]arrow.Array, len(fields))
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	for c, f := range fields {
		var (
			pieces []arrow.Array
			cur    arrow.Array
			lo, hi int64
		)
		flush := func() {
			if cur != nil && hi > lo {
				pieces = append(pieces, array.NewSlice(cur, lo, hi))
			}
		}
		for _, r := range refs {
			a, i := srcs[r.src].Column(idx[r.src][c]), int64(r.row)
			if r.over != nil && r.over[c] >= 0 {
				a, i = ub.Column(c), int64(r.over[c])
			}
			if a == cur && i == hi {
				hi++
				continue
			}
			flush()
			cur, lo, hi = a, i, i+1
		}
		flush()
		switch len(pieces) {
		case 0:
			cols[c] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
		case 1:
			cols[c] = pieces[0]
		default:
			a, err := array.Concatenate(pieces, memory.DefaultAllocator)
			for _, p := range pieces {
				p.Release()
			}
			if err != nil {
				return nil, fmt.Errorf("ingest: column %s: %w", f.Name, err)
			}
			cols[c] = a
		}
	}
	return array.NewRecord(in.arrowSch, cols, int64(len(refs))), nil
}

// sealVersions seals a buffer that changes stored blocks or is late. Its
// events go to a new block, or, when the window was closed before the
// buffer began (late) and its newest stored block has room for them, are
// appended to that block. Every stored block its events go to or its
// changes touch gets a new version, written whole under a new key; then the
// new block and the versions are catalogued in one batch (catalog.Commit),
// whose coverage is the buffer's span; the caller commits offsets after.
func (in *Ingester) sealVersions(ctx context.Context, cl *kgo.Client, ps *partState, b *buffer) error {
	load := in.loadWindow
	if b.nchanges == 0 {
		// Late events only: no event id is looked up.
		load = func(_ context.Context, ps *partState, b *buffer) error { return in.loadStored(ps, b) }
	}
	if err := load(ctx, ps, b); err != nil {
		return err
	}
	bufRec := b.b.NewRecord()
	defer bufRec.Release()
	var ubRec arrow.Record
	if b.ub != nil {
		ubRec = b.ub.NewRecord()
		defer ubRec.Release()
	}
	var newRows []rowRef
	for r := range b.rows {
		l := loc{bufferRows, int32(r)}
		if !b.deleted[l] {
			newRows = append(newRows, rowRef{src: 0, row: int32(r), over: b.over[l]})
		}
	}
	appendTo := int32(-1)
	if n := len(b.stored); b.late && len(newRows) > 0 && n > 0 && in.room(b.stored[n-1], b, len(newRows)) {
		appendTo = int32(n - 1)
	}
	touched := map[int32]bool{}
	if appendTo >= 0 {
		touched[appendTo] = true
	}
	for l := range b.over {
		if l.blk != bufferRows {
			touched[l.blk] = true
		}
	}
	for l := range b.deleted {
		if l.blk != bufferRows {
			touched[l.blk] = true
		}
	}
	var out []block.Meta
	if len(newRows) > 0 && appendTo < 0 {
		rec := bufRec
		if len(newRows) != b.rows || len(b.over) > 0 {
			var err error
			if rec, err = in.materialize([]arrow.Record{bufRec}, newRows, ubRec); err != nil {
				return err
			}
			defer rec.Release()
		}
		full, err := in.write(ctx, in.newBlockMeta(ps, b), rec)
		if err != nil {
			return err
		}
		out = append(out, full)
	}
	blks := make([]int32, 0, len(touched))
	for i := range touched {
		blks = append(blks, i)
	}
	slices.Sort(blks)
	for _, i := range blks {
		full, err := in.newVersion(ctx, ps, b, i, i == appendTo, bufRec, newRows, ubRec)
		if err != nil {
			return err
		}
		out = append(out, full)
	}
	if len(out) == 0 {
		// Every event of the buffer was deleted again before it was
		// sealed: nothing to store (replayed, the records make nothing
		// again).
		return nil
	}
	if err := in.flushDeadLetters(ctx, cl); err != nil {
		return err
	}
	if err := in.cfg.Catalog.Commit(out); err != nil {
		return fmt.Errorf("ingest: catalog %d blocks of window %s, offsets %d-%d: %w", len(out),
			transform.FormatMicros(b.window), b.first, b.last, err)
	}
	in.sealed(ps, b, out)
	return nil
}

// newVersion writes the next version of stored block i of b's window: its
// rows without the deleted ones, with the updates, and b's new rows
// appended when appendRows.
func (in *Ingester) newVersion(ctx context.Context, ps *partState, b *buffer, i int32, appendRows bool,
	bufRec arrow.Record, newRows []rowRef, ubRec arrow.Record) (block.Meta, error) {
	base := b.stored[i]
	var rec arrow.Record
	if err := in.retry(ctx, "read "+base.Key, func() (err error) {
		_, rec, err = block.ReadBlock(ctx, in.cfg.Store, base.Key)
		return err
	}); err != nil {
		return block.Meta{}, fmt.Errorf("ingest: read %s: %w", base.Key, err)
	}
	defer rec.Release()
	var refs []rowRef
	var updated, deleted int64
	changedCols := make([]bool, len(in.cfg.Schema.Fields))
	for r := range int32(rec.NumRows()) {
		l := loc{i, r}
		if b.deleted[l] {
			deleted++
			continue
		}
		o := b.over[l]
		if o != nil {
			updated++
			for c, u := range o {
				if u >= 0 {
					changedCols[c] = true
				}
			}
		}
		refs = append(refs, rowRef{src: 1, row: r, over: o})
	}
	var late int64
	if appendRows {
		refs = append(refs, newRows...)
		late = int64(len(newRows))
	}
	nrec, err := in.materialize([]arrow.Record{bufRec, rec}, refs, ubRec)
	if err != nil {
		return block.Meta{}, fmt.Errorf("ingest: new version of %s: %w", base.Key, err)
	}
	defer nrec.Release()

	m := base.Clone()
	m.Version = base.Ref().Version() + 1
	m.Key = block.RawKey(m.Source, m.Ref())
	m.Generation = in.gen
	m.Seq, m.Columns, m.Size, m.FooterOffset, m.FooterLength, m.Checksum = 0, nil, 0, 0, 0, 0
	if len(refs) == 0 {
		m.MinEventTime, m.MaxEventTime = 0, 0
	}
	ch := block.Change{Version: m.Version, Topic: in.cfg.Topic, Partition: ps.partition, First: b.first, Last: b.last,
		LateRows: late, UpdatedRows: updated, DeletedRows: deleted}
	if m.ColumnVersions == nil {
		m.ColumnVersions = map[string]int64{}
	}
	for c, f := range in.cfg.Schema.Fields {
		// Rows appended or removed change every column: data derived
		// from any of them must be recomputed to stay row-aligned.
		if late > 0 || deleted > 0 || changedCols[c] {
			ch.Columns = append(ch.Columns, f.Name)
			m.ColumnVersions[f.Name] = m.Version
		}
	}
	m.Changes = append(m.Changes, ch)
	return in.write(ctx, m, nrec)
}

// collect runs the catalog's GC every GCInterval, keeping what was
// superseded within GCGrace, and deletes the objects of what it removed
// (catalog first: a crash in between leaves orphan objects, harmless).
// Failures are logged, not fatal: ingestion does not depend on them.
func (in *Ingester) collect(ctx context.Context, log *slog.Logger) {
	now := in.cfg.Clock.Now()
	if in.cfg.GCInterval < 0 || now.Sub(in.lastGC) < in.cfg.GCInterval {
		return
	}
	in.lastGC = now
	snap, err := in.cfg.Catalog.Snapshot()
	if err != nil {
		log.Warn("ingest: gc: snapshot", "err", err)
		return
	}
	ms, err := in.cfg.Catalog.GCUpTo(in.gcHorizon.Advance(now, snap))
	if err != nil {
		log.Warn("ingest: gc", "err", err)
		return
	}
	if len(ms) == 0 {
		return
	}
	in.versionsCollected.Add(int64(len(ms)))
	if _, err := catalog.DeleteObjects(ctx, in.cfg.Store, ms); err != nil {
		log.Warn("ingest: gc: objects of collected versions stay (orphans)", "versions", len(ms), "err", err)
		return
	}
	log.Debug("ingest: collected superseded block versions", "versions", len(ms))
}

// flushDeadLetters waits until the dead letters sent so far are
// acknowledged. Sealing calls it before cataloguing a span: a change
// dead-lettered as unknown_event lies in its window's span, and after a
// restart covered records are skipped, not dead-lettered again.
func (in *Ingester) flushDeadLetters(ctx context.Context, cl *kgo.Client) error {
	if in.dlqPending {
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("ingest: flush dead letters: %w", err)
		}
		in.dlqPending = false
	}
	// A failure of a dead letter flushed earlier counts too: nothing is
	// acknowledged past a dead letter the topic did not take.
	if e := in.dlqErr.Load(); e != nil {
		return fmt.Errorf("ingest: dead-letter topic %s: %w", in.cfg.DeadLetterTopic, *e)
	}
	return nil
}
