package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/compact"
)

// Compaction of small blocks (issue 28; doc.go, "Compaction"). A stream
// sealed often (sigd dev's --seal-after 1s) makes many small blocks, and a
// reader and a worker pay per object: the compactor rewrites the small
// blocks of each partition and window, once the window is closed and
// quiet, into blocks of CompactBytes (warehouse/compact plans which and
// names the result), catalogued as new blocks with their lineage, their
// parts ended by tombstone versions in the same batch (catalog.Compact).
//
// It runs in the ingesting process because only that process knows which
// windows have open buffers: a buffer that read a window's blocks and then
// made a version of one that compaction had ended would be refused by the
// catalog (ErrConflict) and stop ingestion. So a compaction is committed
// under the ingester's lock only while its window has no buffer in its
// partition, and the catalog refuses it if any part changed since it was
// read.

// Defaults of Config's compaction fields.
const (
	// DefaultCompactQuiet is long against the stream's own pace (a late
	// event or a label update within minutes of its window rewrites a
	// compacted block whole) and short against an hourly window.
	DefaultCompactQuiet = 10 * time.Minute
	DefaultCompactEvery = 5 * time.Second
)

// compactor is the compaction goroutine's state: the windows that changed
// and when it saw them, from the catalog's change feed.
type compactor struct {
	pos     int64 // feed position; -1 until read
	stored  int64 // the position stored in the catalog
	pending map[window]pendingWindow
}

type window struct {
	partition int32
	start     int64
}

type pendingWindow struct {
	seen time.Time // when the compactor last saw a change of it
	seq  int64     // the first change's sequence number not acted on
}

// positionName is where the compactor keeps its feed position in the
// catalog: windows changed after it may still be compacted.
func (in *Ingester) positionName() string { return "ingest.compact." + in.cfg.Schema.Source }

// compactLoop compacts every CompactEvery until ctx ends; a failure is
// logged and retried at the next turn.
func (in *Ingester) compactLoop(ctx context.Context, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.cfg.Clock.After(in.cfg.CompactEvery):
		}
		if err := in.compactOnce(ctx, log); err != nil && ctx.Err() == nil {
			log.Warn("ingest: compaction", "err", err)
		}
	}
}

// compactOnce reads the windows changed since its position, compacts those
// that are closed and quiet, and stores the position before the first
// change it has not acted on, so a restart sees again every window it may
// still have to compact (seen again then, so quiet again after
// CompactQuiet).
func (in *Ingester) compactOnce(ctx context.Context, log *slog.Logger) error {
	c := &in.cmp
	if c.pending == nil {
		c.pending = map[window]pendingWindow{}
		c.pos = -1
	}
	if c.pos < 0 {
		pos, err := in.cfg.Catalog.Position(in.positionName())
		if err != nil {
			return err
		}
		c.pos, c.stored = pos, pos
	}
	now := in.cfg.Clock.Now()
	for {
		ms, next, err := in.cfg.Catalog.ChangedSince(c.pos, 1000)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Source != in.cfg.Schema.Source || m.Kafka == nil || m.Kafka.Topic != in.cfg.Topic {
				continue
			}
			w := window{m.Kafka.Partition, m.WindowStart}
			p, ok := c.pending[w]
			if !ok {
				p.seq = m.Seq
			}
			p.seen = now
			c.pending[w] = p
		}
		c.pos = next
		if len(ms) < 1000 {
			break
		}
	}
	ws := make([]window, 0, len(c.pending))
	for w, p := range c.pending {
		if now.Sub(p.seen) >= in.cfg.CompactQuiet {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b window) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.partition, b.partition))
	})
	var errs []error
	for _, w := range ws {
		if ctx.Err() != nil {
			break
		}
		done, err := in.compactWindow(ctx, log, w)
		switch {
		case err != nil:
			errs = append(errs, err)
			c.pending[w] = pendingWindow{seen: in.cfg.Clock.Now(), seq: c.pending[w].seq}
		case done:
			delete(c.pending, w)
		}
	}
	pos := c.pos
	for _, p := range c.pending {
		pos = min(pos, p.seq-1)
	}
	if pos != c.stored {
		if err := in.cfg.Catalog.SetPosition(in.positionName(), pos); err != nil {
			errs = append(errs, err)
		} else {
			c.stored = pos
		}
	}
	return errors.Join(errs...)
}

// errWindowOpen: a buffer of the window opened while a compaction of it was
// being written.
var errWindowOpen = errors.New("ingest: a buffer of the window is open")

// closedAndIdle reports whether window w may be compacted now: its
// partition is this ingester's, the window is closed (the watermark passed
// its end and Lateness) and no buffer of it is open. A partition assigned
// but without a record since is loaded from the catalog (its watermark the
// latest event time catalogued), so an idle stream's windows are compacted
// after a restart too. Called with in.mu held.
func (in *Ingester) closedAndIdle(w window) bool {
	ps := in.parts[w.partition]
	if ps == nil {
		if !in.assigned[w.partition] {
			return false
		}
		var err error
		if ps, err = in.partition(w.partition); err != nil {
			in.cfg.Logger.Warn("ingest: compact: partition state", "partition", w.partition, "err", err)
			return false
		}
	}
	return ps.bufs[w.start] == nil && ps.watermark >= w.start+in.windowLen+in.lateness
}

// compactWindow compacts the small blocks of window w; done when nothing
// is left to do there (compacted, or nothing to compact), false when it
// must be looked at again (not closed, a buffer open).
func (in *Ingester) compactWindow(ctx context.Context, log *slog.Logger, w window) (bool, error) {
	in.mu.Lock()
	ok := in.closedAndIdle(w)
	in.mu.Unlock()
	if !ok {
		return false, nil
	}
	ms, err := in.cfg.Catalog.Window(in.cfg.Schema.Source, w.start)
	if err != nil {
		return false, err
	}
	ms = slices.DeleteFunc(ms, func(m block.Meta) bool {
		return m.Kafka == nil || m.Kafka.Topic != in.cfg.Topic || m.Kafka.Partition != w.partition
	})
	slices.SortFunc(ms, func(a, b block.Meta) int { return cmp.Compare(a.Kafka.First, b.Kafka.First) })
	for _, run := range compact.Plan(ms, in.cfg.CompactBytes) {
		if err := in.compactRun(ctx, w, run); err != nil {
			if errors.Is(err, errWindowOpen) {
				return false, nil
			}
			return false, err
		}
		log.Debug("ingest: compacted blocks", "window", transform.FormatMicros(w.start), "partition", w.partition, "parts", len(run))
	}
	return true, nil
}

// compactRun compacts one run of blocks: their rows concatenated into the
// compacted block's object, written whole, then catalogued with the parts'
// tombstones in one batch (catalog.Compact). A crash before the batch
// leaves an orphan object (the parts stay the blocks: nothing is lost, the
// window is compacted again after the restart, into the same object when
// the run is the same); after it, the compacted block. A refused batch
// deletes its object.
func (in *Ingester) compactRun(ctx context.Context, w window, run []block.Meta) error {
	meta, err := compact.Meta(run, in.gen)
	if err != nil {
		return err
	}
	recs := make([]arrow.Record, 0, len(run))
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, m := range run {
		var rec arrow.Record
		if err := in.retry(ctx, "read "+m.Key, func() (err error) {
			_, rec, err = block.ReadBlock(ctx, in.cfg.Store, m.Key)
			return err
		}); err != nil {
			return fmt.Errorf("ingest: compact: read %s: %w", m.Key, err)
		}
		recs = append(recs, rec)
	}
	rec, err := compact.Concat(recs)
	if err != nil {
		return err
	}
	defer rec.Release()
	full, err := in.write(ctx, meta, rec)
	if err != nil {
		return err
	}
	if h := in.cfg.BeforeCompactCommit; h != nil {
		h(ctx, full)
	}
	in.mu.Lock()
	if !in.closedAndIdle(w) {
		err = errWindowOpen
	} else {
		err = in.cfg.Catalog.Compact(full)
	}
	in.mu.Unlock()
	if err != nil {
		// Nothing names the object: delete it now rather than leave an
		// orphan whose lineage Rebuild would have to weigh. (Unless the
		// catalog has the block: a compaction is never planned twice, but
		// an object the catalog names is never deleted here.)
		if _, gerr := in.cfg.Catalog.Get(full.Source, full.ID); errors.Is(gerr, catalog.ErrNotFound) {
			if derr := in.cfg.Store.Delete(context.WithoutCancel(ctx), full.Key); derr != nil {
				in.cfg.Logger.Warn("ingest: compact: object of a refused compaction stays (orphan)", "object", full.Key, "err", derr)
			}
		}
		if errors.Is(err, catalog.ErrConflict) {
			return fmt.Errorf("ingest: compact window %s partition %d: %w", transform.FormatMicros(w.start), w.partition, err)
		}
		return err
	}
	in.compactions.Add(1)
	in.compactedBlocks.Add(int64(len(run)))
	return nil
}
