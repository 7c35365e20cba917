package matching

import (
	"slices"
	"sort"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Read solutions (paper IV.A): per model input and per block, which
// memoized data to read and whether it is there yet. Resolving one lists
// the catalog's blocks (at a snapshot, issue 21) and reads the cache's
// memo entries; entries that are missing — never computed, or evicted —
// are created pending and scheduled (memo.go), so evicted data is
// recomputed on demand.

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
	// Column is the block's column in Object when it is a pack (issue
	// 28); "" for an object of the component alone.
	Column string
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
		return BlockSolution{Block: blk, Memo: e.Block, Object: e.Object, Column: e.Column, State: e.State, Error: e.Error, Rows: e.Rows, Bytes: e.Bytes}
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
