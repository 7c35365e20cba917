package matching

import (
	"errors"
	"maps"
	"slices"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
)

// Submit (paper IV.A): a pipeline's graph is validated, canonicalized and
// registered with its inputs' covers (cover.go), and its read solution
// resolved (solution.go), whose misses become tasks. Admission comes
// before anything is written: a scheduler that bounds each client's queued
// work (Admitter) refuses a submission past the bound, and a refused
// submission changes nothing.

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
