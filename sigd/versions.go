package sigd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
)

// Versioned blocks (issue 21). The catalog keeps every version of a raw
// block with the snapshot (sequence number) it was added at; sigd
//
//   - resolves read solutions at a snapshot (catalogBlocks.RangeAt; the
//     matching frontend names it and each block's version);
//   - follows new versions (followVersions): for each block's newest
//     version the catalog added, the frontend creates and schedules the memo
//     entries of the components reading a changed column
//     (Frontend.BlockChanged), so a
//     label update recomputes nothing and a feature update exactly the
//     components reading it;
//   - pins snapshots for trainers (PinSnapshot, UnpinSnapshot);
//   - collects garbage (CollectVersions, every --version-gc-every and on
//     Options.GCTrigger; ingestion in sigd leaves it to sigd): the catalog
//     drops the versions no pin and not "now" sees and that were
//     superseded more than --version-gc-grace ago (a reader may have
//     resolved one without a pin), then the memo entries no kept version
//     reads are removed
//     (Frontend.DropVersions), then their memo objects and the raw
//     versions' objects. Catalog and entries first, objects after: a crash
//     in between leaves orphan objects, never an entry or a version
//     without its object; a crash between the catalog's GC and the
//     entries' removal leaves entries (with their objects) that no version
//     reads and no read solution names, storage only, until their
//     component is evicted.

// toBlock is a catalogued raw block version as the matching frontend sees
// it.
func toBlock(m block.Meta) matching.Block {
	return matching.Block{Ref: m.Ref(), RawObject: m.Key, MinEvent: m.MinEventTime, MaxEvent: m.MaxEventTime, Rows: m.Rows,
		ColumnVersions: m.ColumnVersions}
}

func toBlocks(ms []block.Meta) []matching.Block {
	out := make([]matching.Block, len(ms))
	for i, m := range ms {
		out[i] = toBlock(m)
	}
	return out
}

// Snapshot is the catalog's current snapshot (matching.SnapshotBlocks).
func (c catalogBlocks) Snapshot() (int64, error) { return c.cat.Snapshot() }

// RangeAt lists the blocks of [from, to) as of snapshot snap.
func (c catalogBlocks) RangeAt(source string, from, to, snap int64) ([]matching.Block, error) {
	ms, err := c.cat.RangeAt(source, from, to, snap)
	if err != nil {
		return nil, err
	}
	return toBlocks(ms), nil
}

// versionPoll is how often sigd looks for versions the catalog added.
const versionPoll = 250 * time.Millisecond

// DefaultVersionRescan is Options.VersionRescan's default.
const DefaultVersionRescan = time.Minute

// followVersions calls Frontend.BlockChanged for each block whose newest
// version was catalogued since the last pass, until ctx ends. A version
// superseded before a pass saw it is not passed on its own: the entries
// only it would have made are created when a read solution names them
// (resolve creates missing entries). The first pass covers every versioned
// block catalogued before sigd started (BlockChanged only adds what is
// missing), so a crash between a version's commit and its invalidation
// loses nothing.
//
// The catalog has no index of versions by sequence number, so a pass lists
// every block of every source (1.3 s at 50,000 blocks when they no longer
// fit the catalog's decode cache: timed once by hand on this machine, no
// benchmark keeps the figure). A pass runs when sigd's own ingesters made versions since the
// last (their counters are read before the snapshot, and they count after
// their commit, so none is missed), otherwise only every rescan (versions
// committed by anything else), and waits at least four times its own
// duration before the next, so following takes at most a fifth of a core.
func (s *Server) followVersions(ctx context.Context, rescan time.Duration) error {
	var seen int64
	made := int64(-1)
	var last time.Time
	wait := versionPoll
	for {
		if n := s.ingestedVersions(); n != made || time.Since(last) >= rescan {
			start := time.Now()
			got, err := s.syncVersions(seen)
			if err != nil {
				s.log.Warn("following block versions", "err", err)
			} else {
				seen, made, last = got, n, start
			}
			wait = max(versionPoll, 4*time.Since(start))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// ingestedVersions is how many block versions sigd's ingesters made.
func (s *Server) ingestedVersions() int64 {
	var n int64
	for _, in := range s.ingesters {
		n += in.Stats().Versions
	}
	return n
}

// syncVersions invalidates for the versions catalogued after snapshot
// since and returns the snapshot it got to.
func (s *Server) syncVersions(since int64) (int64, error) {
	snap, err := s.catalog.Snapshot()
	if err != nil || snap <= since {
		return since, err
	}
	sources, err := s.catalog.Sources()
	if err != nil {
		return since, err
	}
	for _, src := range sources {
		// The catalog has no index by sequence number: a pass lists the
		// source's blocks (decoded once, cached by the catalog), and only
		// when something was committed.
		ms, err := s.catalog.Blocks(src)
		if err != nil {
			return since, err
		}
		for _, m := range ms {
			if m.V() < 2 || m.Seq <= since || m.Seq > snap {
				continue
			}
			inv, err := s.frontend.BlockChanged(src, toBlock(m))
			if err != nil {
				return since, fmt.Errorf("block %s version %d: %w", m.ID, m.V(), err)
			}
			s.metrics.versionChanged(inv)
			if len(inv.Tasks) > 0 {
				s.log.Info("block version invalidated memo entries", "block", m.ID, "version", m.V(),
					"candidates", inv.Candidates, "tasks", len(inv.Tasks))
			}
		}
	}
	return snap, nil
}

// DefaultVersionGCEvery and DefaultVersionGCGrace are --version-gc-every's
// and --version-gc-grace's defaults.
const (
	DefaultVersionGCEvery = time.Minute
	DefaultVersionGCGrace = 10 * time.Minute
)

// gcHorizons are the catalog snapshots version GC took, with when: the
// horizon is the newest one at least --version-gc-grace old (versions
// superseded after it are kept, catalog.GCUpTo).
type gcHorizons struct {
	mu      sync.Mutex
	taken   []gcHorizon
	horizon int64
}

type gcHorizon struct {
	at   time.Time
	snap int64
}

// advance records snapshot snap taken at now and returns the horizon.
func (g *gcHorizons) advance(now time.Time, snap int64, grace time.Duration) int64 {
	if grace < 0 {
		return math.MaxInt64
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.taken = append(g.taken, gcHorizon{now, snap})
	for len(g.taken) > 0 && now.Sub(g.taken[0].at) >= grace {
		g.horizon = g.taken[0].snap
		g.taken = g.taken[1:]
	}
	return g.horizon
}

// gcLoop collects versions every cfg.VersionGCEvery and whenever
// Options.GCTrigger fires, until ctx ends.
func (s *Server) gcLoop(ctx context.Context, trigger <-chan struct{}) error {
	t := time.NewTicker(s.cfg.VersionGCEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-trigger:
		}
		if _, err := s.CollectVersions(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("version gc", "err", err)
		}
	}
}

// GCResult is what one version GC removed.
type GCResult struct {
	// Versions are the raw block versions the catalog dropped, MemoEntries
	// the memo entries no kept version reads, Objects the objects deleted
	// (raw and memo).
	Versions, MemoEntries, Objects int
}

// CollectVersions runs one version GC (see the top of this file).
func (s *Server) CollectVersions(ctx context.Context) (GCResult, error) {
	var res GCResult
	snap, err := s.catalog.Snapshot()
	if err != nil {
		return res, err
	}
	removed, err := s.catalog.GCUpTo(s.gcHorizons.advance(s.clock.Now(), snap, s.cfg.VersionGCGrace))
	if err != nil {
		return res, err
	}
	res.Versions = len(removed)
	type blockKey struct{ source, id string }
	byBlock := map[blockKey][]matching.Block{}
	var order []blockKey
	for _, m := range removed {
		k := blockKey{m.Source, m.ID}
		if _, ok := byBlock[k]; !ok {
			order = append(order, k)
		}
		byBlock[k] = append(byBlock[k], toBlock(m))
	}
	var objects []string
	for _, k := range order {
		live, err := s.catalog.Versions(k.source, k.id)
		if err != nil {
			return res, err
		}
		gone, err := s.frontend.DropVersions(k.source, byBlock[k], toBlocks(live))
		if err != nil {
			return res, err
		}
		res.MemoEntries += len(gone)
		for _, e := range gone {
			objects = append(objects, e.Object)
		}
	}
	for _, m := range removed {
		objects = append(objects, m.Key)
	}
	if len(objects) > 0 {
		n, err := s.store.DeleteMany(ctx, objects)
		res.Objects = n
		if err != nil {
			return res, fmt.Errorf("deleting the objects of collected versions: %w", err)
		}
	}
	s.metrics.versionGC(res)
	if res.Versions > 0 {
		s.log.Info("version gc", "versions", res.Versions, "memo_entries", res.MemoEntries, "objects", res.Objects)
	}
	return res, nil
}

// checkPinName checks a pin's name for p: 1-128 letters, digits, '.', '_',
// '-' and ':'; a trainer's pins are its client's, "<client>:<anything>".
func checkPinName(p *auth.Principal, name string) error {
	if name == "" || len(name) > 128 {
		return status.Errorf(codes.InvalidArgument, "name: must be 1 to 128 characters, got %d", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '.' || c == '_' || c == '-' || c == ':' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			continue
		}
		return status.Errorf(codes.InvalidArgument, "name: character %q at byte %d is not allowed (letters, digits, '.', '_', '-', ':')", c, i)
	}
	if p.Role == auth.RoleTrainer && !strings.HasPrefix(name, p.Client+":") {
		return status.Errorf(codes.PermissionDenied, "name: %s's pins start with %q (its client)", p.Name, p.Client+":")
	}
	return nil
}

// PinSnapshot keeps a catalog snapshot's versions from GC under a name.
func (h *sigService) PinSnapshot(ctx context.Context, req *sigv1.PinSnapshotRequest) (*sigv1.PinSnapshotResponse, error) {
	p, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	if err := checkPinName(p, req.GetName()); err != nil {
		return nil, err
	}
	cur, err := h.s.catalog.Snapshot()
	if err != nil {
		return nil, grpcError(err)
	}
	if snap := req.GetSnapshot(); snap < 0 || snap > cur {
		return nil, status.Errorf(codes.InvalidArgument, "snapshot: %d is not in [0, %d] (0 is now, %d the current snapshot)", snap, cur, cur)
	}
	snap, err := h.s.catalog.Pin(req.GetName(), req.GetSnapshot())
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.PinSnapshotResponse{Name: req.GetName(), Snapshot: snap}, nil
}

// UnpinSnapshot removes a pin (none by that name is not an error).
func (h *sigService) UnpinSnapshot(ctx context.Context, req *sigv1.UnpinSnapshotRequest) (*sigv1.UnpinSnapshotResponse, error) {
	p, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	if err := checkPinName(p, req.GetName()); err != nil {
		return nil, err
	}
	if err := h.s.catalog.Unpin(req.GetName()); err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.UnpinSnapshotResponse{}, nil
}
