package matching

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

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

// InputError is a request the frontend refuses; Field names what is wrong
// (the gRPC layer answers InvalidArgument with it).
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(field string, format string, args ...any) error {
	return &InputError{Field: field, Err: fmt.Errorf(format, args...)}
}

// checkRange checks a read range [from, to): not empty, and within the
// event times SIG stores. A range reaching past them is refused rather than
// clamped: it is a client's bug (a sentinel such as MinInt64, a time in the
// wrong unit), and a solution for a range other than the one asked for
// would be echoed back as if it were that one.
func checkRange(from, to int64) error {
	switch {
	case from >= to:
		return inputErr("range", "empty event range [%d, %d): start must be before end", from, to)
	case from < transform.MinEventTime:
		return inputErr("range.start_micros", "%d is before %s, the earliest event time SIG stores (event times are microseconds since the Unix epoch)",
			from, transform.FormatMicros(transform.MinEventTime))
	case to > transform.EndEventTime:
		return inputErr("range.end_micros", "%d is past %s (%d), the end of the event times SIG stores (event times are microseconds since the Unix epoch)",
			to, transform.FormatMicros(transform.EndEventTime), transform.EndEventTime)
	}
	return nil
}

// Priorities are in [0, MaxPriority]; higher runs first.
const MaxPriority = 1000

// CheckPriority checks a pipeline's priority (at submit and when it is
// changed).
func CheckPriority(p int32) error {
	if p < 0 || p > MaxPriority {
		return inputErr("priority", "%d is out of range [0, %d]", p, MaxPriority)
	}
	return nil
}

// ValidateName checks a client, pipeline or input name: 1 to 128 bytes of
// letters, digits, '.', '_' and '-'. Any other byte (in particular control
// bytes, '/', and HTML) is refused so names are safe in keys, object paths,
// logs and the web UI.
func ValidateName(field, s string) error {
	if s == "" || len(s) > 128 {
		return inputErr(field, "must be 1 to 128 characters, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' || c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			continue
		}
		return inputErr(field, "character %q at byte %d is not allowed (letters, digits, '.', '_', '-')", c, i)
	}
	return nil
}

// ValidatePipelineName checks a pipeline name: 1 to 128 bytes of valid
// UTF-8 without control characters. Pipeline names are free text chosen by
// model owners, so every place that shows one escapes it (the web UI) and
// every place that puts one in an object key escapes it (checkpoints).
func ValidatePipelineName(field, s string) error {
	if s == "" || len(s) > 128 {
		return inputErr(field, "must be 1 to 128 bytes, got %d", len(s))
	}
	if !utf8.ValidString(s) {
		return inputErr(field, "is not valid UTF-8")
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return inputErr(field, "control character %U at byte %d is not allowed", r, i)
		}
	}
	return nil
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
	watch    notifier
	stats    frontendStats
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

// SubmitRequest registers a pipeline's graph for an event range.
type SubmitRequest struct {
	Client, Pipeline string
	Priority         int32
	Source           string // "ads" when empty
	Graph            *transform.Graph
	From, To         int64 // event time [From, To), micros
	// Memoize overrides the insertion policy for model inputs, by name:
	// insertion.Always memoizes the whole component, insertion.Never
	// nothing of it.
	Memoize map[string]insertion.Override
}

// SubmitResult is the answer to a submit.
type SubmitResult struct {
	Solution      *Solution
	Components    int
	ComponentHits int
	BlockHits     int
	BlockMisses   int
	TasksEnqueued int
}

// InputSolution is the read solution of one model input. When its
// component is memoized whole (Computed false), Blocks are the component's
// memo entries. Otherwise readers compute it over the memo nodes of its
// cover (MemoNodes, each with its entries, none when readers compute it
// from raw columns), and Blocks hold per raw block the state of the cover
// as a whole: ready when every memo node is, failed when one is, pending
// otherwise, without an object.
type InputSolution struct {
	Name      string
	Component canon.Key
	Type      string
	Columns   []string
	DSL       string
	Blocks    []BlockSolution
	Computed  bool
	MemoNodes []MemoNodeSolution
	// Residual is the canonical DSL with memo nodes as memo("<key
	// prefix>"), Reason the insertion policy's (empty for a pipeline
	// registered before covers).
	Residual, Reason string
}

// MemoNodeSolution is one memo node of a cover and its memo entries.
type MemoNodeSolution struct {
	Key    canon.Key
	Type   string
	DSL    string // its cone, one input named out
	Blocks []BlockSolution
}

// BlockSolution is one block of one input.
type BlockSolution struct {
	Block Block
	// Memo is the memo entry's block (issue 21): the block and the input
	// version of its data in the columns the component reads
	// (Block.InputVersion).
	Memo   blockref.Memo
	Object string // memo object key, assigned even while pending
	State  MemoState
	Error  string
	Rows   int64
	Bytes  int64
}

// Solution is a read solution (paper IV.A): per model input and per block,
// which memoized data to read and whether it is there yet.
type Solution struct {
	Client, Pipeline, Source string
	From, To                 int64
	// Snapshot is the catalog snapshot the blocks were resolved at (0
	// when the catalog keeps no versions); Raw names each block's version.
	Snapshot               int64
	Inputs                 []InputSolution
	Raw                    []Block
	Ready, Pending, Failed int
}

// Complete reports whether every block of every input is ready.
func (s *Solution) Complete() bool { return s.Pending == 0 && s.Failed == 0 }

func (f *Frontend) schema(source string) (*transform.Schema, error) {
	s, err := f.cfg.Schema(source)
	if err != nil {
		return nil, inputErr("graph.raw_source", "%v", err)
	}
	return s, nil
}

// Submit validates, canonicalizes and registers a pipeline's graph and
// returns its read solution; misses become tasks. Submitting the same graph
// again changes nothing but the last-requested times.
func (f *Frontend) Submit(req SubmitRequest) (*SubmitResult, error) {
	if err := ValidateName("client", req.Client); err != nil {
		return nil, err
	}
	if err := ValidatePipelineName("pipeline", req.Pipeline); err != nil {
		return nil, err
	}
	if err := CheckPriority(req.Priority); err != nil {
		return nil, err
	}
	if err := checkRange(req.From, req.To); err != nil {
		return nil, err
	}
	if req.Source == "" {
		req.Source = "ads"
	}
	if req.Graph == nil {
		return nil, inputErr("graph", "no graph")
	}
	s, err := f.schema(req.Source)
	if err != nil {
		return nil, err
	}
	c, err := canon.Canonicalize(req.Graph, s, f.cfg.Registry, f.cfg.Limits)
	if err != nil {
		return nil, &InputError{Field: "graph", Err: err}
	}
	for _, name := range slices.Sorted(maps.Keys(req.Memoize)) {
		if _, ok := c.Component(name); !ok {
			return nil, inputErr("memoize", "%q is not a model input of the graph", name)
		}
		if o := req.Memoize[name]; o > insertion.Never {
			return nil, inputErr("memoize", "%q: unknown override %d", name, o)
		}
	}
	now := f.cfg.Clock.Now()
	cache := f.cfg.Cache
	res := &SubmitResult{}

	// The previous registration, to drop usage of components it no longer has.
	old, err := cache.Pipeline(req.Client, req.Pipeline)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	p := Pipeline{Client: req.Client, Name: req.Pipeline, Priority: req.Priority, Source: req.Source,
		From: req.From, To: req.To, Graph: transform.Print(req.Graph), Submitted: now}
	var prev *Pipeline
	if err == nil {
		prev = &old
		p.Submitted = old.Submitted // the first registration
	}
	blocks, err := f.cfg.Blocks.Range(req.Source, req.From, req.To)
	if err != nil {
		return nil, err
	}
	covers, err := f.covers(c, &req, blocks)
	if err != nil {
		return nil, err
	}
	seen := map[canon.Key]bool{}
	var added []ComponentRecord
	addRecord := func(comp *canon.Component) (exists bool, err error) {
		if exists, err = cache.HasComponent(comp.Key); err != nil || exists {
			return exists, err
		}
		added = append(added, ComponentRecord{Key: comp.Key, Source: req.Source, Type: comp.Type.String(),
			Columns: comp.Columns, Ops: comp.Ops, Nodes: len(comp.Nodes), DSL: c.DSL(comp, "out"), Created: now,
			NodeKeys: c.NodeKeys(comp)})
		return false, nil
	}
	for i := range c.Components {
		comp := &c.Components[i]
		p.Inputs = append(p.Inputs, PipelineInput{Name: comp.Input, Component: comp.Key, Type: comp.Type.String(), Cover: covers[i]})
		if seen[comp.Key] {
			continue
		}
		seen[comp.Key] = true
		res.Components++
		exists, err := addRecord(comp)
		if err != nil {
			return nil, err
		}
		if exists {
			res.ComponentHits++
		}
	}
	// The memo nodes of the covers are components too (a node's cone is its
	// component, under its key): their records carry the DSL workers run
	// and the search index eviction finds them by.
	for i := range p.Inputs {
		for _, k := range p.Inputs[i].MemoKeys() {
			if seen[k] {
				continue
			}
			seen[k] = true
			j, _ := c.NodeIndex(k)
			cone := c.Cone(j, "")
			if _, err := addRecord(&cone); err != nil {
				return nil, err
			}
		}
	}
	columns := func(k canon.Key) ([]string, error) {
		for i := range added {
			if added[i].Key == k {
				return added[i].Columns, nil
			}
		}
		r, err := cache.Component(k)
		return r.Columns, err
	}
	if err := f.admit(req.Client, p.memoKeys(), blocks, columns); err != nil {
		return nil, err
	}
	if err := cache.RegisterPipeline(&p, prev, added, now); err != nil {
		return nil, err
	}
	sol, hits, misses, enq, err := f.resolve(&p, now, 0)
	if err != nil {
		return nil, err
	}
	res.Solution, res.BlockHits, res.BlockMisses, res.TasksEnqueued = sol, hits, misses, enq
	f.stats.submits.Add(1)
	f.stats.components.Add(uint64(res.Components))
	f.stats.componentHits.Add(uint64(res.ComponentHits))
	f.stats.blockRequests.Add(uint64(hits + misses))
	f.stats.blockHits.Add(uint64(hits))
	f.stats.tasksEnqueued.Add(uint64(enq))
	return res, nil
}

// admit asks an Admitter scheduler whether client may queue the tasks a
// submission of memo keys over blocks needs: its (key, block) pairs that
// are neither memoized nor failed. The list is built only when the
// client's room is less than every pair.
func (f *Frontend) admit(client string, keys []canon.Key, blocks []Block, columns func(canon.Key) ([]string, error)) error {
	a, ok := f.cfg.Scheduler.(Admitter)
	if !ok {
		return nil
	}
	if len(keys)*len(blocks) <= a.Room(client) {
		return nil
	}
	scan, err := f.cfg.Cache.newMemoScanner()
	if err != nil {
		return err
	}
	defer scan.close()
	var tasks []Task
	for _, k := range keys {
		memos, err := scan.memos(k)
		if err != nil {
			return err
		}
		cols, err := columns(k)
		if err != nil {
			return err
		}
		for _, blk := range blocks {
			// What resolve will enqueue: missing entries (created pending)
			// and pending ones with a generation.
			ref := blk.MemoRef(cols)
			if e, ok := memos[ref]; ok && (e.State != MemoPending || e.Gen == 0) {
				continue
			}
			tasks = append(tasks, Task{Component: k, Block: ref})
		}
	}
	return a.Admit(client, tasks)
}

// ReadSolution answers the current read solution of a registered pipeline
// for [from, to) (the submitted range when from == to == 0). Memo entries
// that are missing — never computed, or evicted — are created pending and
// scheduled: evicted data is recomputed on demand.
func (f *Frontend) ReadSolution(client, pipeline string, from, to int64) (*Solution, error) {
	return f.ReadSolutionAt(client, pipeline, from, to, 0)
}

// ReadSolutionAt is ReadSolution with the blocks as of catalog snapshot
// snap (0: now, the current snapshot): each block at its newest version
// catalogued at or before it, and each input's memo entries those
// versions' (issue 21: every unit of an epoch reads one snapshot). A
// snapshot the catalog cannot answer (after the current one; or any, when
// the catalog keeps no versions) is an InputError naming snapshot.
func (f *Frontend) ReadSolutionAt(client, pipeline string, from, to, snap int64) (*Solution, error) {
	if snap < 0 {
		return nil, inputErr("snapshot", "%d is negative (0 is now)", snap)
	}
	p, err := f.cfg.Cache.Pipeline(client, pipeline)
	if err != nil {
		return nil, err
	}
	if from != 0 || to != 0 {
		if err := checkRange(from, to); err != nil {
			return nil, err
		}
		p.From, p.To = from, to
	}
	now := f.cfg.Clock.Now()
	sol, _, _, _, err := f.resolve(&p, now, snap)
	if err != nil {
		return nil, err
	}
	if err := f.cfg.Cache.Touch(p.usedKeys(), now); err != nil {
		return nil, err
	}
	return sol, nil
}

// resolve builds a pipeline's read solution, creating and scheduling the
// memo entries that are missing. It returns the block hits (ready) and
// misses (anything else) over distinct (component, block) pairs, and the
// number of tasks enqueued.
func (f *Frontend) resolve(p *Pipeline, now time.Time, snap int64) (sol *Solution, hits, misses, enqueued int, err error) {
	blocks, snap, err := f.blocksAt(p.Source, p.From, p.To, snap)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	sol = &Solution{Client: p.Client, Pipeline: p.Name, Source: p.Source, From: p.From, To: p.To, Raw: blocks, Snapshot: snap}
	scan, err := f.cfg.Cache.newMemoScanner()
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer scan.close()
	// First the components and their memo entries; then block by block,
	// in event order, each component's entry of the block, created and
	// scheduled if missing. So a client's queue holds a block's tasks
	// together, every component of it (tasks of one priority run in
	// enqueue order): a worker reads a block's raw columns once for all
	// its components (block.SegmentCache), and a trainer's first blocks
	// are complete first.
	recs := map[canon.Key]ComponentRecord{}
	entries := map[canon.Key][]MemoEntry{} // by block index
	comps := p.memoKeys()                  // distinct, in input order
	record := func(k canon.Key) (ComponentRecord, error) {
		r, ok := recs[k]
		if !ok {
			if r, err = f.cfg.Cache.Component(k); err != nil {
				return r, err
			}
			recs[k] = r
		}
		return r, nil
	}
	for i := range p.Inputs {
		if _, err := record(p.Inputs[i].Component); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	for _, k := range comps {
		if _, err := record(k); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	// Smaller cones first, so that a block's nested memo nodes are queued
	// before the memo nodes containing them, which workers then compute
	// over them (sigd's task descriptions name the ready ones).
	slices.SortStableFunc(comps, func(a, b canon.Key) int { return recs[a].Nodes - recs[b].Nodes })
	memos := make([]map[blockref.Memo]MemoEntry, len(comps))
	cols := make([][]string, len(comps)) // the raw columns each reads
	for i, k := range comps {
		cols[i] = recs[k].Columns
		if memos[i], err = scan.memos(k); err != nil {
			return nil, 0, 0, 0, err
		}
		entries[k] = make([]MemoEntry, len(blocks))
	}
	for bi, blk := range blocks {
		for i, k := range comps {
			// The entry of the block's data in the columns k reads: a
			// new version that changed none of them has the same ref.
			ref := blk.MemoRef(cols[i])
			e, ok := memos[i][ref]
			if !ok {
				if e, err = f.createMissing(k, ref, now, nil); err != nil {
					return nil, 0, 0, 0, err
				}
			}
			entries[k][bi] = e
			// Count and schedule each (key, block) once per call.
			if e.State == MemoReady {
				hits++
			} else {
				misses++
			}
			if e.State == MemoPending && e.Gen != 0 {
				if err := f.cfg.Scheduler.Enqueue(k, ref, p.Client, p.Name, p.Priority); err != nil {
					return nil, 0, 0, 0, err
				}
				enqueued++
			}
		}
	}
	blockSol := func(blk Block, e MemoEntry) BlockSolution {
		return BlockSolution{Block: blk, Memo: e.Block, Object: e.Object, State: e.State, Error: e.Error, Rows: e.Rows, Bytes: e.Bytes}
	}
	for i := range p.Inputs {
		in := &p.Inputs[i]
		rec := recs[in.Component]
		is := InputSolution{Name: in.Name, Component: in.Component, Type: in.Type, Columns: rec.Columns, DSL: rec.DSL,
			Blocks: make([]BlockSolution, 0, len(blocks)), Computed: in.Computed()}
		if in.Cover != nil {
			is.Residual, is.Reason = in.Cover.Residual, in.Cover.Reason
		}
		if !is.Computed {
			for bi, blk := range blocks {
				is.Blocks = append(is.Blocks, blockSol(blk, entries[in.Component][bi]))
			}
		} else {
			for _, k := range in.Cover.Memo {
				r := recs[k]
				mn := MemoNodeSolution{Key: k, Type: r.Type, DSL: r.DSL, Blocks: make([]BlockSolution, 0, len(blocks))}
				for bi, blk := range blocks {
					mn.Blocks = append(mn.Blocks, blockSol(blk, entries[k][bi]))
				}
				is.MemoNodes = append(is.MemoNodes, mn)
			}
			for bi, blk := range blocks {
				b := BlockSolution{Block: blk, Memo: blk.MemoRef(rec.Columns), State: MemoReady, Rows: blk.Rows}
				for _, mn := range is.MemoNodes {
					switch e := mn.Blocks[bi]; {
					case e.State == MemoFailed && b.State != MemoFailed:
						b.State, b.Error = MemoFailed, e.Error
					case e.State != MemoReady && b.State == MemoReady:
						b.State = e.State
					}
				}
				is.Blocks = append(is.Blocks, b)
			}
		}
		for _, b := range is.Blocks {
			switch b.State {
			case MemoReady:
				sol.Ready++
			case MemoPending:
				sol.Pending++
			case MemoFailed:
				sol.Failed++
			}
		}
		sol.Inputs = append(sol.Inputs, is)
	}
	return sol, hits, misses, enqueued, nil
}

// createMissing creates the pending memo entry of (k, block) if it is still
// missing (a concurrent request may have created it, and a worker completed
// it, since the caller looked; overwriting would recompute it) and returns
// the entry. While k is being evicted it creates nothing and returns a
// pending entry without a generation, which is not scheduled: it is created
// by the first read after the eviction. The check and the creation hold
// evictMu, which Evicting takes to mark components, so an entry is either
// created before the mark (and the eviction deletes it) or not at all until
// the eviction is done. Were they apart, an entry could be created between
// the eviction's removal of the entries and of the objects, completed by a
// worker whose object the eviction then deletes, and stay ready without its
// object (TestEvictionDuringEntryCreation in eviction).
//
// created, when not nil, is set when this call created the entry.
func (f *Frontend) createMissing(k canon.Key, id blockref.Memo, now time.Time, created *bool) (MemoEntry, error) {
	f.evictMu.Lock()
	defer f.evictMu.Unlock()
	if f.evicting[k] > 0 {
		return MemoEntry{Component: k, Block: id, State: MemoPending, Object: block.MemoKey(k, id)}, nil
	}
	fresh := newPending(k, id, now)
	return f.cfg.Cache.UpdateMemo(k, id, func(cur *MemoEntry, exists bool) bool {
		if exists {
			return false
		}
		*cur = fresh
		if created != nil {
			*created = true
		}
		return true
	})
}

// newPending is a new pending memo entry of (k, memo block ref) with a new
// generation.
func newPending(k canon.Key, ref blockref.Memo, now time.Time) MemoEntry {
	return MemoEntry{Component: k, Block: ref, State: MemoPending, Object: block.MemoKey(k, ref),
		Updated: now, Gen: rand.Uint64() | 1}
}

// blocksAt lists the blocks of [from, to) as of snapshot snap (0: the
// current one) and says which snapshot that was (0 when the catalog keeps
// no versions).
func (f *Frontend) blocksAt(source string, from, to, snap int64) ([]Block, int64, error) {
	sb, ok := f.cfg.Blocks.(SnapshotBlocks)
	if !ok {
		if snap != 0 {
			return nil, 0, inputErr("snapshot", "%d: this catalog keeps no snapshots (0 is now)", snap)
		}
		blocks, err := f.cfg.Blocks.Range(source, from, to)
		return blocks, 0, err
	}
	cur, err := sb.Snapshot()
	if err != nil {
		return nil, 0, err
	}
	if snap == 0 {
		snap = cur
	} else if snap > cur {
		return nil, 0, inputErr("snapshot", "%d is after the catalog's current snapshot %d", snap, cur)
	}
	blocks, err := sb.RangeAt(source, from, to, snap)
	return blocks, snap, err
}

// Begin returns the generation of a pending memo entry, for a worker about
// to compute it. ok is false when there is nothing to compute (the entry is
// gone or already ready).
func (f *Frontend) Begin(k canon.Key, block blockref.Memo) (gen uint64, ok bool, err error) {
	e, err := f.cfg.Cache.Memo(k, block)
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return e.Gen, e.State == MemoPending, nil
}

// Needed reports whether some registered pipeline reads k's memo entries
// (a cover's memo node, or a whole component). A pending entry no cover
// names any more — its pipelines re-submitted under other covers — need
// not be computed: sigd describes its task as having nothing to compute,
// and last-requested eviction removes the entry.
func (f *Frontend) Needed(k canon.Key) (bool, error) {
	users, err := f.cfg.Cache.Users(k)
	if err != nil {
		return false, err
	}
	for _, u := range users {
		p, err := f.cfg.Cache.Pipeline(u[0], u[1])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if p.Memoizes(k) {
			return true, nil
		}
	}
	return false, nil
}

// ErrStale: the memo entry a worker computed was evicted (and perhaps
// re-created) meanwhile; the worker must not mark it.
var ErrStale = errors.New("matching: memo entry changed while computing")

// MarkReady records that the memo object of (k, block) was written whole.
// It only succeeds on the pending entry of the given generation, so a worker
// that raced with an eviction never marks data that was deleted.
func (f *Frontend) MarkReady(k canon.Key, block blockref.Memo, gen uint64, rows, bytes int64) error {
	var stale bool
	e, err := f.cfg.Cache.UpdateMemo(k, block, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State != MemoPending || e.Gen != gen {
			stale = true
			return false
		}
		e.State, e.Rows, e.Bytes, e.Error, e.Updated = MemoReady, rows, bytes, "", f.cfg.Clock.Now()
		return true
	})
	if err != nil {
		return err
	}
	if stale {
		return ErrStale
	}
	f.watch.notify(k, e)
	// The node's measured size, for the insertion policy: a statistic, so
	// failing to record it fails nothing.
	_ = f.cfg.Cache.AddSize(k, bytes, rows)
	return nil
}

// MarkFailed records that the task of (k, block) was quarantined.
func (f *Frontend) MarkFailed(k canon.Key, block blockref.Memo, reason string) error {
	e, err := f.cfg.Cache.UpdateMemo(k, block, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State == MemoReady {
			return false
		}
		e.State, e.Error, e.Updated = MemoFailed, reason, f.cfg.Clock.Now()
		return true
	})
	if err != nil {
		return err
	}
	f.watch.notify(k, e)
	return nil
}

// MarkPending turns a failed entry pending again (quarantine released).
func (f *Frontend) MarkPending(k canon.Key, block blockref.Memo) error {
	e, err := f.cfg.Cache.UpdateMemo(k, block, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State != MemoFailed {
			return false
		}
		e.State, e.Error, e.Updated, e.Gen = MemoPending, "", f.cfg.Clock.Now(), rand.Uint64()|1
		return true
	})
	if err != nil {
		return err
	}
	f.watch.notify(k, e)
	return nil
}

// Invalidate turns the ready memo entry of (k, block) of generation gen
// pending again, with a new generation, and tells watchers: its object was
// found corrupt or lost, or an operator asked for it to be recomputed. It
// refuses with ErrStale when the entry is no longer that ready incarnation
// (evicted, recomputed or invalidated meanwhile), so that a decision taken
// on one incarnation never touches the next. The caller removes the old
// object before (so that no worker's new object can be removed after it)
// and schedules the entry after (Schedule).
func (f *Frontend) Invalidate(k canon.Key, block blockref.Memo, gen uint64, reason string) (MemoEntry, error) {
	var stale bool
	e, err := f.cfg.Cache.UpdateMemo(k, block, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State != MemoReady || e.Gen != gen {
			stale = true
			return false
		}
		e.State, e.Rows, e.Bytes, e.Error, e.Updated, e.Gen = MemoPending, 0, 0, reason, f.cfg.Clock.Now(), rand.Uint64()|1
		return true
	})
	if err != nil {
		return e, err
	}
	if stale {
		return e, ErrStale
	}
	f.watch.notify(k, e)
	return e, nil
}

// Schedule enqueues the task of (k, block) for every pipeline using k, at
// that pipeline's priority (the queue runs it at the highest of them). It
// returns how many pipelines asked.
func (f *Frontend) Schedule(k canon.Key, block blockref.Memo) (int, error) {
	return f.schedule(MemoEntry{Component: k, Block: block}, map[canon.Key][][2]string{}, map[[2]string]int32{})
}

// schedule is Schedule with the users of components and the priorities of
// pipelines cached across calls.
func (f *Frontend) schedule(e MemoEntry, users map[canon.Key][][2]string, prio map[[2]string]int32) (int, error) {
	cache := f.cfg.Cache
	us, ok := users[e.Component]
	if !ok {
		var err error
		if us, err = cache.Users(e.Component); err != nil {
			return 0, err
		}
		users[e.Component] = us
	}
	n := 0
	for _, u := range us {
		pr, ok := prio[u]
		if !ok {
			p, err := cache.Pipeline(u[0], u[1])
			if err != nil {
				continue
			}
			pr = p.Priority
			prio[u] = pr
		}
		if err := f.cfg.Scheduler.Enqueue(e.Component, e.Block, u[0], u[1], pr); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Reconcile schedules every pending memo entry again. sigd runs it at start
// so that a crash between writing an entry and enqueueing its task loses
// nothing (Enqueue is idempotent). Priorities come from the pipelines using
// each component.
func (f *Frontend) Reconcile() (int, error) {
	n := 0
	var pending []MemoEntry
	err := f.cfg.Cache.eachMemoOfAll(func(e MemoEntry) {
		if e.State == MemoPending {
			pending = append(pending, e)
		}
	})
	if err != nil {
		return 0, err
	}
	users := map[canon.Key][][2]string{}
	prio := map[[2]string]int32{}
	for _, e := range pending {
		if _, err := f.schedule(e, users, prio); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Watch subscribes to changes of the memo entries of the given components.
// The returned channel receives every change until cancel is called; a
// subscriber that falls behind by more than its buffer loses changes and is
// told so by a closed channel (it then re-reads the solution).
func (f *Frontend) Watch(keys []canon.Key) (<-chan MemoEntry, func()) {
	return f.watch.subscribe(keys)
}

// Evicting runs fn while no memo entry of the given components can be
// created (see Frontend.evicting). Evictions of overlapping sets may run
// at once; a component stays marked until the last of them is done.
func (f *Frontend) Evicting(keys []canon.Key, fn func() error) error {
	f.evictMu.Lock()
	if f.evicting == nil {
		f.evicting = map[canon.Key]int{}
	}
	for _, k := range keys {
		f.evicting[k]++
	}
	f.evictMu.Unlock()
	defer func() {
		f.evictMu.Lock()
		for _, k := range keys {
			if f.evicting[k]--; f.evicting[k] <= 0 {
				delete(f.evicting, k)
			}
		}
		f.evictMu.Unlock()
	}()
	return fn()
}

// Notify tells watchers of a change made outside the frontend (eviction).
func (f *Frontend) Notify(e MemoEntry) { f.watch.notify(e.Component, e) }

// Reuse summarizes how the cache's ready memo blocks are shared: each
// counted with the pipelines whose read solutions name it (Cache.Reuse over
// the frontend's blocks).
func (f *Frontend) Reuse() (Reuse, error) { return f.cfg.Cache.Reuse(f.cfg.Blocks) }

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

// notifier fans memo changes out to watchers.
type notifier struct {
	mu   sync.Mutex
	subs map[canon.Key]map[*subscriber]bool
}

type subscriber struct {
	ch     chan MemoEntry
	closed bool
}

// watchBuffer is a subscription's channel capacity. A subscriber that
// falls further behind is not silently skipped: notify closes its channel
// and it re-reads the whole solution. So the buffer only has to absorb
// ordinary bursts (a few blocks completing while the watcher sends); a
// small one keeps an idle subscription small: 64 entries of 136 bytes
// (unsafe.Sizeof(MemoEntry{})), 8.5 KiB.
const watchBuffer = 64

func (n *notifier) subscribe(keys []canon.Key) (<-chan MemoEntry, func()) {
	s := &subscriber{ch: make(chan MemoEntry, watchBuffer)}
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[canon.Key]map[*subscriber]bool{}
	}
	for _, k := range keys {
		if n.subs[k] == nil {
			n.subs[k] = map[*subscriber]bool{}
		}
		n.subs[k][s] = true
	}
	n.mu.Unlock()
	cancel := func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, k := range keys {
			delete(n.subs[k], s)
			if len(n.subs[k]) == 0 {
				delete(n.subs, k)
			}
		}
		if !s.closed {
			s.closed = true
			close(s.ch)
		}
	}
	return s.ch, cancel
}

func (n *notifier) notify(k canon.Key, e MemoEntry) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs[k] {
		if s.closed {
			continue
		}
		select {
		case s.ch <- e:
		default:
			// Too far behind: close so the watcher re-reads everything.
			s.closed = true
			close(s.ch)
		}
	}
}

// EachMemo calls fn with every memo entry the solution names, under its
// key: each whole input's blocks under its component, each memo node's
// blocks under the node (an entry shared by several inputs comes once per
// input). Watchers follow these.
func (s *Solution) EachMemo(fn func(k canon.Key, b *BlockSolution)) {
	for i := range s.Inputs {
		in := &s.Inputs[i]
		if !in.Computed {
			for j := range in.Blocks {
				fn(in.Component, &in.Blocks[j])
			}
			continue
		}
		for _, mn := range in.MemoNodes {
			for j := range mn.Blocks {
				fn(mn.Key, &mn.Blocks[j])
			}
		}
	}
}

// MemoKeys are the keys of the memo entries the solution names, each once.
func (s *Solution) MemoKeys() []canon.Key {
	var out []canon.Key
	seen := map[canon.Key]bool{}
	s.EachMemo(func(k canon.Key, _ *BlockSolution) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	})
	return out
}

// SortedInputs returns the solution's inputs sorted by name (stable output
// for CLIs).
func (s *Solution) SortedInputs() []InputSolution {
	out := append([]InputSolution(nil), s.Inputs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
