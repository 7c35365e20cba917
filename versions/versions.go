package versions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

// Catalog is what the Manager reads and changes of the block catalog
// (*catalog.Catalog).
type Catalog interface {
	Snapshot() (int64, error)
	ChangedSince(after int64, limit int) ([]block.Meta, int64, error)
	Position(name string) (int64, error)
	SetPosition(name string, seq int64) error
	GCUpTo(horizon int64) ([]block.Meta, error)
	Versions(source, id string) ([]block.Meta, error)
}

// Frontend makes and drops the memo entries of block versions (the
// matching frontend, in the catalog's terms: sigd converts).
type Frontend interface {
	BlockChanged(source string, m block.Meta) (matching.Invalidation, error)
	DropVersions(source string, removed, live []block.Meta) ([]matching.MemoEntry, error)
	// Unnamed returns the objects removed entries left without an entry
	// naming them (matching.Cache.Unnamed): a pack's goes only with its
	// last entry (issue 28).
	Unnamed(removed []matching.MemoEntry) ([]string, error)
	// SweepingPacks runs fn while no completion switches entries to a
	// pack (matching.Frontend.SweepingPacks): Collect finds the packs
	// left unnamed and deletes them inside it, since the members of a
	// block-batched pack are completed one by one and one whose
	// completion found the pack before must not have it deleted after.
	SweepingPacks(fn func() error) error
}

// Store deletes objects (*objstore.Store).
type Store interface {
	DeleteMany(ctx context.Context, keys []string) (int, error)
}

// PositionName is the name the Manager stores its position in the
// catalog's change feed under.
const PositionName = "sigd.versions"

// Defaults of Options.
const (
	DefaultPoll     = 250 * time.Millisecond
	DefaultGCEvery  = time.Minute
	DefaultGCGrace  = 10 * time.Minute
	DefaultPageSize = 1000
)

// Options configure a Manager.
type Options struct {
	Catalog  Catalog
	Frontend Frontend
	Store    Store
	// Clock times polls and GC rounds and dates GC's snapshots. Default
	// the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
	// Poll is how often Run looks for versions it has not followed.
	// Default DefaultPoll.
	Poll time.Duration
	// PageSize bounds the versions read from the feed at once; the
	// position is stored after each page. Default DefaultPageSize.
	PageSize int
	// GCEvery is how often Run collects versions (sigd's
	// --version-gc-every). Default DefaultGCEvery.
	GCEvery time.Duration
	// GCGrace keeps a superseded version at least this long (sigd's
	// --version-gc-grace; catalog.Horizon). Default DefaultGCGrace;
	// negative: none.
	GCGrace time.Duration
	// GCTrigger, if set, runs a GC on each receive besides every GCEvery
	// (tests).
	GCTrigger <-chan struct{}
	// OnChanged is called for each version followed with what it made,
	// OnCollected after each GC with what it removed (sigd's metrics).
	OnChanged   func(matching.Invalidation)
	OnCollected func(GCResult)
}

// EnsureDefaults fills in the defaults of unset fields.
func (o *Options) EnsureDefaults() {
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
	if o.GCEvery <= 0 {
		o.GCEvery = DefaultGCEvery
	}
	if o.GCGrace == 0 {
		o.GCGrace = DefaultGCGrace
	}
	if o.OnChanged == nil {
		o.OnChanged = func(matching.Invalidation) {}
	}
	if o.OnCollected == nil {
		o.OnCollected = func(GCResult) {}
	}
}

// Manager follows block versions and collects them (see the package
// documentation).
type Manager struct {
	o Options

	feed    *follower
	gcMu    sync.Mutex // one GC at a time; guards horizon
	horizon catalog.Horizon
}

// New returns a Manager; Run starts it.
func New(o Options) *Manager {
	o.EnsureDefaults()
	return &Manager{o: o, feed: newFollower(PositionName), horizon: catalog.Horizon{Grace: o.GCGrace}}
}

// Run follows versions every Poll and collects them every GCEvery and on
// GCTrigger, until ctx ends. Failures are logged and retried at the next
// turn: neither stops sigd.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.collectLoop(ctx)
	}()
	for {
		if _, err := m.Follow(ctx); err != nil {
			m.o.Logger.Warn("following block versions", "err", err)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-m.o.Clock.After(m.o.Poll):
		}
	}
}

func (m *Manager) collectLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.o.Clock.After(m.o.GCEvery):
		case <-m.o.GCTrigger:
		}
		if _, err := m.Collect(ctx); err != nil && !errors.Is(err, context.Canceled) {
			m.o.Logger.Warn("version gc", "err", err)
		}
	}
}

// Follow passes every block version the catalog added since the stored
// position to Frontend.BlockChanged, in sequence order, storing the
// position after each page, and returns how many versions it passed. The
// first call reads the position (0, everything, for a catalog that has
// none). On a failure the position stays before the version that failed,
// so the next call starts with it. A pass that has begun a page finishes
// it even if ctx ends (each version is a few cache writes), so a shutdown
// leaves nothing it acted on to repeat.
func (m *Manager) Follow(ctx context.Context) (int, error) {
	return m.feed.follow(ctx, m.o.Catalog, m.o.PageSize, func(b block.Meta) (bool, error) {
		if b.Ref().Version() < 2 || b.IsTombstone() {
			// A new block has no entry to be out of date; a compaction's
			// tombstone has no rows for an entry to read (its rows are the
			// compacted block's, a new block: issue 28).
			return false, nil
		}
		inv, err := m.o.Frontend.BlockChanged(b.Source, b)
		if err != nil {
			return false, fmt.Errorf("block %s/%s version %d: %w", b.Source, b.ID, b.Ref().Version(), err)
		}
		m.o.OnChanged(inv)
		if len(inv.Tasks) > 0 {
			m.o.Logger.Info("block version invalidated memo entries", "block", b.ID, "version", b.Ref().Version(),
				"candidates", inv.Candidates, "tasks", len(inv.Tasks))
		}
		return true, nil
	})
}

// Position is the position Follow has stored (-1 before its first call).
func (m *Manager) Position() int64 { return m.feed.position() }

// GCResult is what one version GC removed.
type GCResult struct {
	// Versions are the raw block versions the catalog dropped, MemoEntries
	// the memo entries no kept version reads, Objects the objects deleted
	// (raw and memo).
	Versions, MemoEntries, Objects int
}

// Collect runs one version GC (the package documentation, "Collecting").
func (m *Manager) Collect(ctx context.Context) (GCResult, error) {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	var res GCResult
	cat := m.o.Catalog
	snap, err := cat.Snapshot()
	if err != nil {
		return res, err
	}
	removed, err := cat.GCUpTo(m.horizon.Advance(m.o.Clock.Now(), snap))
	if err != nil {
		return res, err
	}
	res.Versions = len(removed)
	type blockKey struct{ source, id string }
	byBlock := map[blockKey][]block.Meta{}
	var order []blockKey
	for _, b := range removed {
		k := blockKey{b.Source, b.ID}
		if _, ok := byBlock[k]; !ok {
			order = append(order, k)
		}
		byBlock[k] = append(byBlock[k], b)
	}
	var gone []matching.MemoEntry
	for _, k := range order {
		live, err := cat.Versions(k.source, k.id)
		if err != nil {
			return res, err
		}
		g, err := m.o.Frontend.DropVersions(k.source, byBlock[k], live)
		if err != nil {
			return res, err
		}
		res.MemoEntries += len(g)
		gone = append(gone, g...)
	}
	if len(gone) == 0 && len(removed) == 0 {
		m.o.OnCollected(res)
		return res, nil
	}
	err = m.o.Frontend.SweepingPacks(func() error {
		// An object of one component goes with its entry; a pack (issue
		// 28) only when no entry names it any more: its other members may
		// be of components whose columns the collected versions did not
		// change, still ready in it.
		objects, err := m.o.Frontend.Unnamed(gone)
		if err != nil {
			return err
		}
		for _, b := range removed {
			objects = append(objects, b.Key)
		}
		if len(objects) == 0 {
			return nil
		}
		n, err := m.o.Store.DeleteMany(ctx, objects)
		res.Objects = n
		if err != nil {
			return fmt.Errorf("deleting the objects of collected versions: %w", err)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	m.o.OnCollected(res)
	if res.Versions > 0 {
		m.o.Logger.Info("version gc", "versions", res.Versions, "memo_entries", res.MemoEntries, "objects", res.Objects)
	}
	return res, nil
}
