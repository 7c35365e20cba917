package matching

import (
	"sync"
	"sync/atomic"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The matching frontend (paper IV.A, Figure 3): its configuration, the
// interfaces it takes (the catalog's blocks; the work queues and their
// admission) and its counters. What it does is in the files beside it,
// one concern each (doc.go lists them).

// Block is a raw block of the warehouse, at one version, as the frontend
// sees it.
type Block struct {
	// Ref is the block and its version (issue 21: version 1 unless it
	// changed after it was sealed).
	Ref blockref.Ref
	// RawObject is the object of this version of the block.
	RawObject string
	MinEvent  int64 // event time range of the rows, micros, inclusive
	MaxEvent  int64
	Rows      int64
	// ColumnVersions gives per raw column the version at which its values
	// last changed (absent: 1), as block.Meta does.
	ColumnVersions map[string]int64
	// Parts is a compacted block's lineage (block.Meta.Parts, issue 28),
	// which read solutions pass on to trainers.
	Parts []block.Part
}

// Blocks lists the raw blocks of a source overlapping an event range, in
// event order (the warehouse catalog), each at its newest version.
type Blocks interface {
	Range(source string, from, to int64) ([]Block, error)
}

// SnapshotBlocks is a Blocks that keeps versions (the warehouse catalog,
// issue 21): Snapshot is the catalog's current sequence number, a
// consistent view; RangeAt lists the blocks as of snapshot snap, each at
// its newest version catalogued at or before it. Read solutions at a
// snapshot need it; without it they are refused.
type SnapshotBlocks interface {
	Blocks
	Snapshot() (int64, error)
	RangeAt(source string, from, to, snap int64) ([]Block, error)
}

// Scheduler receives memoization tasks (the work queues). Enqueue is
// idempotent per (component, block) and merges requesters.
type Scheduler interface {
	Enqueue(component canon.Key, block blockref.Memo, client, pipeline string, priority int32) error
}

// Admitter is a Scheduler that bounds the work a client may have queued
// (workers.Queue's MaxQueuedPerClient). Submit asks it before registering
// anything, so a refused submission changes nothing. Reads of a solution,
// which re-create evicted entries, do not ask: that work was admitted when
// the pipeline was submitted.
type Admitter interface {
	// Room is how many more tasks client may queue.
	Room(client string) int
	// Admit returns nil if client may ask for tasks (those it has queued
	// already count once), else the error Submit returns.
	Admit(client string, tasks []Task) error
}

// Task names one memoization task: a component over a raw block.
type Task struct {
	Component canon.Key
	Block     blockref.Memo
}

// FrontendConfig wires a Frontend.
type FrontendConfig struct {
	Cache     *Cache
	Blocks    Blocks
	Scheduler Scheduler
	// Schema returns the schema of a raw source.
	Schema   func(source string) (*transform.Schema, error)
	Registry *transform.Registry
	Limits   transform.Limits
	Clock    clock.Clock
	// Insertion are the insertion policy's constants (matching/insertion);
	// Insertion.MemoizeAll is the paper's policy.
	Insertion insertion.Config
}

// Frontend is the matching frontend (paper IV.A, Figure 3): it matches
// submitted graphs against the cache, schedules misses and answers read
// solutions.
type Frontend struct {
	cfg FrontendConfig
	// evicting marks components whose entries and objects an eviction is
	// removing: no entry of theirs is created until it is done, so none can
	// be re-created pending and marked ready between the removal of the
	// entries and of the objects (see MarkReady).
	evictMu  sync.Mutex
	evicting map[canon.Key]int
	// packMu keeps the sweep of packs no entry names (SweepingPacks)
	// from deleting a pack between a completion's check that it exists
	// and the switch of its entries to it (Memos.CompletePack): a pack is
	// unnamed from its write until that switch.
	packMu sync.RWMutex
	watch  notifier
	stats  frontendStats
}

type frontendStats struct {
	submits, components, componentHits atomic.Uint64
	blockRequests, blockHits           atomic.Uint64
	tasksEnqueued                      atomic.Uint64
}

// NewFrontend returns a frontend.
func NewFrontend(cfg FrontendConfig) *Frontend {
	if cfg.Registry == nil {
		cfg.Registry = transform.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	cfg.Limits = cfg.Limits.EnsureDefaults()
	return &Frontend{cfg: cfg}
}

// Cache returns the frontend's cache.
func (f *Frontend) Cache() *Cache { return f.cfg.Cache }

func (f *Frontend) schema(source string) (*transform.Schema, error) {
	s, err := f.cfg.Schema(source)
	if err != nil {
		return nil, inputErr("graph.raw_source", "%v", err)
	}
	return s, nil
}

// Stats are the frontend's counters since start.
type Stats struct {
	Submits, Components, ComponentHits uint64
	BlockRequests, BlockHits           uint64
	TasksEnqueued                      uint64
}

// Stats returns the counters.
func (f *Frontend) Stats() Stats {
	return Stats{
		Submits: f.stats.submits.Load(), Components: f.stats.components.Load(), ComponentHits: f.stats.componentHits.Load(),
		BlockRequests: f.stats.blockRequests.Load(), BlockHits: f.stats.blockHits.Load(), TasksEnqueued: f.stats.tasksEnqueued.Load(),
	}
}
