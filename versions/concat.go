package versions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/compact"
	"github.com/sigdata/sig/warehouse/objstore"
)

// FeedCatalog is what a Concatenator reads of the block catalog
// (*catalog.Catalog): its change feed, a stored position, a block's
// versions.
type FeedCatalog interface {
	Snapshot() (int64, error)
	ChangedSince(after int64, limit int) ([]block.Meta, int64, error)
	Position(name string) (int64, error)
	SetPosition(name string, seq int64) error
	Versions(source, id string) ([]block.Meta, error)
}

// ConcatStore reads the parts' memo objects and the compacted block's
// event ids, and writes packs (*objstore.Store).
type ConcatStore interface {
	objstore.Reader
	objstore.Writer
}

// ConcatPositionName is the name a Concatenator stores its position in
// the catalog's change feed under.
const ConcatPositionName = "sigd.compacted"

// ConcatOptions configure a Concatenator.
type ConcatOptions struct {
	Catalog FeedCatalog
	// Memos names the packs in the compacted blocks' entries
	// (CompleteConcatenated); its Frontend lists the candidates.
	Memos *matching.Memos
	Store ConcatStore
	// Registry says which ops are row-wise (compact.RowWise; default
	// transform.Default(): the registry sigd's frontend and workers use).
	Registry *transform.Registry
	// Compression, PackBytes and NewKey are the packs' (as workers write
	// them: block.PackOptions; the members are stored narrow).
	Compression block.Compression
	PackBytes   int64
	NewKey      func(source string, raw blockref.Ref) string
	// Hold, if set, is called with the packs' keys after they were written
	// and before any entry names them (crash tests: SIG_TEST_HOLD_CONCAT
	// holds sigd there); an error stops the block's concatenation.
	Hold func(ctx context.Context, packs []string) error
	// Clock, Logger, Poll and PageSize as for Options.
	Clock    clock.Clock
	Logger   *slog.Logger
	Poll     time.Duration
	PageSize int
	// OnConcat, if set, is told what each compacted block's concatenation
	// did (sigd's metrics).
	OnConcat func(ConcatResult)
}

// ConcatResult is what the concatenation of one compacted block did.
type ConcatResult struct {
	Block blockref.Ref
	// Concatenated are the entries named in a concatenated pack (created
	// ready or switched from pending); Packs the packs written.
	Concatenated, Packs int
	// Left are the candidates left to the normal path (read solutions
	// create their entries pending, workers compute them), by reason:
	// "not row-wise", a part's entry not ready, the entry ready already, a
	// part's object unreadable, the entry taken meanwhile.
	Left map[string]int
}

// left counts a candidate left for reason.
func (r *ConcatResult) left(reason string) {
	if r.Left == nil {
		r.Left = map[string]int{}
	}
	r.Left[reason]++
}

// LeftTotal is how many candidates were left to the normal path.
func (r *ConcatResult) LeftTotal() int {
	n := 0
	for _, v := range r.Left {
		n += v
	}
	return n
}

// Concatenator makes the memo entries of compacted blocks from their
// parts' where it can (issue 28; the package documentation,
// "Compacted blocks"): it follows the catalog's change feed from its own
// stored position (ConcatPositionName) and, for each compacted block it
// finds, concatenates the parts' ready columns of every row-wise
// component into packs of the compacted block and names them in its
// entries.
type Concatenator struct {
	o    ConcatOptions
	feed *follower
}

// NewConcatenator returns a Concatenator; Run starts it.
func NewConcatenator(o ConcatOptions) *Concatenator {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Registry == nil {
		o.Registry = transform.Default()
	}
	if o.OnConcat == nil {
		o.OnConcat = func(ConcatResult) {}
	}
	return &Concatenator{o: o, feed: newFollower(ConcatPositionName)}
}

// Run follows the feed every Poll until ctx ends. Failures are logged and
// retried at the next turn.
func (c *Concatenator) Run(ctx context.Context) error {
	for {
		if _, err := c.Follow(ctx); err != nil && ctx.Err() == nil {
			c.o.Logger.Warn("concatenating compacted blocks' memo entries", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.o.Clock.After(c.o.Poll):
		}
	}
}

// Follow concatenates the memo entries of every compacted block the
// catalog added since the stored position, in sequence order, and stores
// the position after each page; it returns how many compacted blocks it
// handled. On a failure the position stays before the block that failed,
// so the next call starts with it (a repeat finds the entries it made
// ready, and concatenates only what is still missing).
func (c *Concatenator) Follow(ctx context.Context) (int, error) {
	return c.feed.follow(ctx, c.o.Catalog, c.o.PageSize, func(b block.Meta) (bool, error) {
		if len(b.Parts) == 0 || b.IsTombstone() {
			return false, nil
		}
		res, err := c.Concat(ctx, b.Source, b.ID)
		if err != nil {
			return false, fmt.Errorf("compacted block %s/%s: %w", b.Source, b.ID, err)
		}
		c.o.OnConcat(res)
		c.o.Logger.Info("compacted block's memo entries", "block", b.ID, "concatenated", res.Concatenated,
			"packs", res.Packs, "left_to_recompute", res.LeftTotal(), "left", res.Left)
		return true, nil
	})
}

// Position is the position Follow has stored (-1 before its first call).
func (c *Concatenator) Position() int64 { return c.feed.position() }

// unreadable reports whether err says an object is gone or not what its
// entry takes it to be: the components reading it are left to the normal
// path rather than retried.
func unreadable(err error) bool {
	return errors.Is(err, objstore.ErrNotFound) || errors.Is(err, block.ErrCorrupt)
}

// partRead is what is read of one object of one part: the members'
// columns in it.
type partRead struct {
	part    int
	object  string
	columns map[int]string // candidate index -> column name in the object
}

// Concat concatenates the memo entries of compacted block id of source
// (the package documentation, "Compacted blocks") and returns what it
// did. An error is one worth retrying (the store or the cache failing);
// what cannot be concatenated is left (ConcatResult.Left).
func (c *Concatenator) Concat(ctx context.Context, source, id string) (ConcatResult, error) {
	res := ConcatResult{}
	vs, err := c.o.Catalog.Versions(source, id)
	if err != nil || len(vs) == 0 {
		return res, err
	}
	newest := vs[len(vs)-1]
	i1 := slices.IndexFunc(vs, func(m block.Meta) bool { return m.Ref().Version() == 1 })
	if i1 < 0 || newest.IsTombstone() || len(vs[i1].Parts) == 0 {
		return res, nil // collected, or not a compacted block
	}
	cm := vs[i1]
	res.Block = cm.Ref()
	parts := make([]block.Meta, len(cm.Parts))
	for i, p := range cm.Parts {
		pvs, err := c.o.Catalog.Versions(source, p.ID)
		if err != nil {
			return res, err
		}
		j := slices.IndexFunc(pvs, func(m block.Meta) bool { return m.Ref() == p.Ref() })
		if j < 0 {
			// The part's version compacted was collected: its entries may
			// be gone with it.
			res.left("a part's version collected")
			return res, nil
		}
		parts[i] = pvs[j]
	}
	pblocks := make([]matching.Block, len(parts))
	for i, p := range parts {
		pblocks[i] = matching.BlockOf(p)
	}
	cands, err := c.o.Memos.Frontend.Compacted(source, matching.BlockOf(cm), matching.BlockOf(newest), pblocks)
	if err != nil {
		return res, err
	}
	// The row-wise candidates whose parts are all ready, and the reads of
	// their columns: one per object of each part.
	var use []int
	for i := range cands {
		cd := &cands[i]
		if cd.Left != "" {
			res.left(cd.Left)
			continue
		}
		g, err := transform.Parse([]byte(cd.Record.DSL), "component "+cd.Component.Short(), transform.Limits{})
		if err != nil || !compact.RowWise(g, c.o.Registry) {
			res.left("not row-wise")
			continue
		}
		use = append(use, i)
	}
	if len(use) == 0 {
		return res, nil
	}
	var reads []*partRead
	type objectOf struct {
		part   int
		object string
	}
	byObject := map[objectOf]*partRead{}
	for _, i := range use {
		for pi, e := range cands[i].Parts {
			k := objectOf{pi, e.Object}
			r := byObject[k]
			if r == nil {
				r = &partRead{part: pi, object: e.Object, columns: map[int]string{}}
				byObject[k] = r
				reads = append(reads, r)
			}
			r.columns[i] = e.Column
		}
	}
	// Each part's column of each candidate, and its object's event ids.
	cols := map[int][]compact.PartColumn{}
	for _, i := range use {
		cols[i] = make([]compact.PartColumn, len(parts))
	}
	bad := map[int]bool{}
	var held []arrow.Array
	defer func() {
		for _, a := range held {
			a.Release()
		}
	}()
	rd := &block.ObjectReader{Store: c.o.Store}
	for _, r := range reads {
		p := parts[r.part]
		found := map[int]block.Column{}
		d, err := rd.Read(ctx, block.ObjectRead{Key: r.object, Want: func(meta block.Meta, _ bool) ([]string, error) {
			clear(found)
			names := []string{transform.ColEventID}
			for i, column := range r.columns {
				cd := &cands[i]
				col, err := block.CheckMember(meta, column, cd.Component, cd.Parts[r.part].Block, cd.Record.Type, p.Rows)
				if err != nil {
					continue // this candidate is left; the others read on
				}
				found[i] = col
				names = append(names, col.Name)
			}
			return names, nil
		}})
		if err != nil {
			if !unreadable(err) {
				return res, err
			}
			c.o.Logger.Warn("a part's memo object is unreadable: its components are left to recompute", "object", r.object, "err", err)
		}
		var ids arrow.Array
		if err == nil {
			evc, _ := d.Meta.Column(transform.ColEventID)
			seg, _ := d.Segment(transform.ColEventID)
			if ids, err = block.DecodeSegment(r.object, evc, seg, d.Meta.Rows); err == nil {
				held = append(held, ids)
			}
		}
		for i := range r.columns {
			col, ok := found[i]
			if err != nil || !ok {
				bad[i] = true
				continue
			}
			seg, _ := d.Segment(col.Name)
			v, derr := block.DecodeSegment(r.object, col, seg, d.Meta.Rows)
			if derr != nil {
				bad[i] = true
				continue
			}
			held = append(held, v)
			cols[i][r.part] = compact.PartColumn{Block: cands[i].Parts[r.part].Block, EventID: ids, Value: v}
		}
	}
	// The compacted block's event ids, from its own object: each part's
	// columns must be row-aligned with its rows there (ConcatMember).
	crec, err := block.ReadColumns(ctx, c.o.Store, cm, nil)
	if err != nil {
		if !unreadable(err) {
			return res, err
		}
		for range use {
			res.left("the compacted block unreadable")
		}
		return res, nil
	}
	defer crec.Release()
	eventID := crec.Column(0)
	var members []block.PackMember
	builds := map[canon.Key]string{} // component -> its parts' build
	for _, i := range use {
		if bad[i] {
			res.left("a part's object unreadable")
			continue
		}
		m, err := compact.ConcatMember(cm, eventID, cands[i].Component, cols[i])
		if err != nil {
			c.o.Logger.Warn("a compacted block's memo column cannot be concatenated: left to recompute",
				"block", cm.ID, "component", cands[i].Component.Short(), "err", err)
			res.left("not row-aligned")
			continue
		}
		held = append(held, m.Value)
		members = append(members, m)
		builds[cands[i].Component] = partsBuild(cands[i].Parts)
	}
	if len(members) == 0 {
		return res, nil
	}
	metas, packed, err := block.WritePacks(ctx, c.o.Store, cm, eventID, members, block.PackOptions{
		EncodeOptions: block.EncodeOptions{Compression: c.o.Compression}, MaxBytes: c.o.PackBytes, NewKey: c.o.NewKey})
	if err != nil {
		// Packs written before the failure are named by no entry: the
		// evictor's sweep deletes them.
		return res, err
	}
	res.Packs = len(metas)
	if c.o.Hold != nil {
		keys := make([]string, len(metas))
		for i, m := range metas {
			keys[i] = m.Key
		}
		if err := c.o.Hold(ctx, keys); err != nil {
			return res, err
		}
	}
	// One batch per pack (CompleteConcatenated): a pack is named by every
	// member still wanted or by none.
	byPack := map[string][]matching.Member{}
	for _, p := range packed {
		byPack[p.Object] = append(byPack[p.Object], matching.Member{Component: p.Component, Block: p.Block,
			Completion: matching.Completion{Object: p.Object, Column: p.Column.Name, Rows: cm.Rows, Bytes: p.Column.Length,
				Build: builds[p.Component]}})
	}
	objects := make([]string, 0, len(byPack))
	for o := range byPack {
		objects = append(objects, o)
	}
	sort.Strings(objects)
	for _, o := range objects {
		marked, err := c.o.Memos.CompleteConcatenated(ctx, o, byPack[o])
		if err != nil {
			return res, err
		}
		for _, ok := range marked {
			if ok {
				res.Concatenated++
			} else {
				res.left("taken meanwhile")
			}
		}
	}
	return res, nil
}

// partsBuild is the build a concatenated entry records (MemoEntry.Build,
// what a confirmed mismatch of its values names): its parts' build when
// every part was computed by the same one, since concatenating copies
// their values and computes none; "" (unknown, as for an entry of a
// worker that predates builds) when the parts' builds differ or one is
// unknown, so that no one build is blamed for values another computed.
// The entry records no op times either: no kernel ran.
func partsBuild(parts []matching.MemoEntry) string {
	if len(parts) == 0 {
		return ""
	}
	b := parts[0].Build
	for _, p := range parts[1:] {
		if p.Build != b {
			return ""
		}
	}
	return b
}
