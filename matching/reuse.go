package matching

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/warehouse/blockref"
)

// How memoized blocks are shared (testdata/reuse.txt): a ready memo block
// counts the registered pipelines whose read solutions name it.

// Reuse summarizes how memoized blocks are shared (paper IV.A: "the
// average data block stored in the cache is utilized by 22 different
// models"; VII.B: "each memoized component was used by 22 models on
// average, but the peak could be higher than 400").
type Reuse struct {
	Components int
	Pipelines  int
	// ReadyBlocks, PendingBlocks and FailedBlocks count memo entries.
	ReadyBlocks, PendingBlocks, FailedBlocks int64
	// ReadyBytes is the size of all ready memo objects.
	ReadyBytes int64
	// PipelinesPerBlockMean and Max: pipelines using each ready block.
	PipelinesPerBlockMean float64
	PipelinesPerBlockMax  int
	// BlocksByPipelines[n] is the number of ready blocks used by exactly n
	// pipelines (its last element is not zero; empty without ready
	// blocks): the whole distribution, for percentiles. A ready block no
	// registered pipeline covers any more counts at n = 0.
	BlocksByPipelines []int64
}

// Reuse summarizes how the cache's ready memo blocks are shared: each
// counted with the pipelines whose read solutions name it (Cache.Reuse over
// the frontend's blocks).
func (f *Frontend) Reuse() (Reuse, error) { return f.cfg.Cache.Reuse(f.cfg.Blocks) }

// Reuse walks the cache (cost linear in its size; callers cache the
// result). A ready memo block (component k, block b) is used by the
// registered pipelines that have k among the memo keys of their inputs
// (their covers' memo nodes) and whose event range covers b, as blocks
// lists it: the very walk a read solution makes (Frontend.resolve), so a
// pipeline counts for the blocks its read solution names and no others.
//
// Its memory is the pipelines' (their ranges, the blocks those cover, the
// keys they use without reading their memo entries), not the cache's: it
// walks the memo entries and the user index together, both in key order,
// counting one key's users at a time. (A map of every component's users
// per block, built first, was 4 GB of sigd's RSS at a million components:
// bench/scale.txt.)
func (c *Cache) Reuse(blocks Blocks) (Reuse, error) {
	var r Reuse
	ranges, err := c.pipelineRanges(blocks)
	if err != nil {
		return r, err
	}
	r.Pipelines = len(ranges.of)
	users, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxUser}, UpperBound: []byte{pfxUser + 1}})
	if err != nil {
		return r, err
	}
	defer users.Close()
	// uses are the current component's users by range: (range, pipelines).
	var uses [][2]int
	var pfx []byte
	cur, started := canon.Key{}, false
	var sum int64
	var cols []string // the current component's columns, once needed
	haveCols := false
	err = pebbleutil.Scan(c.db, memosPrefix, func(key, v []byte) (bool, error) {
		k := keyAt(key, 1)
		if !started || k != cur {
			cur, started, uses, haveCols = k, true, uses[:0], false
			pfx = append(append(pfx[:0], pfxUser), k[:]...) // userPrefix(k), without an allocation per component
			for ok := users.SeekGE(pfx); ok && bytes.HasPrefix(users.Key(), pfx); ok = users.Next() {
				name := users.Key()[len(pfx):]
				ri, ok := ranges.of[string(name)]
				if !ok || ranges.unread[string(name)][k] {
					continue // not a registered pipeline, or not reading k's entries
				}
				i := 0
				for i < len(uses) && uses[i][0] != ri {
					i++
				}
				if i == len(uses) {
					uses = append(uses, [2]int{ri, 0})
				}
				uses[i][1]++
			}
			if err := users.Error(); err != nil {
				return false, err
			}
		}
		state, size, err := memoStateBytes(v)
		if err != nil {
			return false, fmt.Errorf("memo entry %s/%s: %w", k.Short(), key[1+keyLen:], err)
		}
		switch state {
		case MemoReady:
			r.ReadyBlocks++
			r.ReadyBytes += size
			u := 0
			// The entry's block and input version; a ref without a version
			// suffix (nearly all) is looked up without a string allocated.
			ref := key[1+keyLen:]
			var m blockref.Memo
			v := int64(1)
			if bytes.Contains(ref, []byte(".v")) {
				m = blockref.ParseMemo(string(ref))
				v = m.InputVersion()
			}
			for _, ru := range uses {
				var blk *Block
				if m.IsZero() {
					blk = ranges.covers[ru[0]][string(ref)]
				} else {
					blk = ranges.covers[ru[0]][m.ID()]
				}
				if blk == nil {
					continue
				}
				ok := false
				// The entry of the block's current data in k's columns
				// (issue 21): an entry of another input version is one no
				// read solution names now (GC removes it with its version).
				if len(blk.ColumnVersions) == 0 {
					ok = v == 1
				} else {
					if !haveCols {
						rec, err := c.Component(k)
						if err != nil {
							return false, err
						}
						cols, haveCols = rec.Columns, true
					}
					ok = blk.InputVersion(cols) == v
				}
				if ok {
					u += ru[1]
				}
			}
			sum += int64(u)
			r.PipelinesPerBlockMax = max(r.PipelinesPerBlockMax, u)
			for len(r.BlocksByPipelines) <= u {
				r.BlocksByPipelines = append(r.BlocksByPipelines, 0)
			}
			r.BlocksByPipelines[u]++
		case MemoPending:
			r.PendingBlocks++
		case MemoFailed:
			r.FailedBlocks++
		}
		return true, nil
	})
	if err != nil {
		return r, err
	}
	if r.ReadyBlocks > 0 {
		r.PipelinesPerBlockMean = float64(sum) / float64(r.ReadyBlocks)
	}
	err = pebbleutil.Scan(c.db, componentPrefix(nil), func(_, _ []byte) (bool, error) { r.Components++; return true, nil })
	return r, err
}

// pipelineRanges are the registered pipelines' event ranges: of maps a
// pipeline (client\x00name, as its user keys end) to its range's index,
// covers[i] are the blocks range i covers, by id. Ranges repeat across a
// fleet, so there are few.
type pipelineRanges struct {
	of     map[string]int
	covers []map[string]*Block
	// unread[pipeline] are the keys the pipeline uses (the user index
	// names it) whose memo entries it does not read: components its
	// readers compute over their covers' memo nodes.
	unread map[string]map[canon.Key]bool
}

func (c *Cache) pipelineRanges(blocks Blocks) (pipelineRanges, error) {
	type span struct {
		source   string
		from, to int64
	}
	index := map[span]int{}
	out := pipelineRanges{of: map[string]int{}, unread: map[string]map[canon.Key]bool{}}
	err := pebbleutil.Scan(c.db, pipelinePrefix(""), func(key, v []byte) (bool, error) {
		var p Pipeline
		if err := json.Unmarshal(v, &p); err != nil {
			return false, fmt.Errorf("pipeline %q: %w", key[1:], err)
		}
		// The user index names every key p uses; p reads the memo
		// entries of its memo keys only.
		memo := map[canon.Key]bool{}
		for _, k := range p.memoKeys() {
			memo[k] = true
		}
		for _, k := range p.usedKeys() {
			if !memo[k] {
				if out.unread[string(key[1:])] == nil {
					out.unread[string(key[1:])] = map[canon.Key]bool{}
				}
				out.unread[string(key[1:])][k] = true
			}
		}
		sp := span{p.Source, p.From, p.To}
		i, ok := index[sp]
		if !ok {
			bs, err := blocks.Range(p.Source, p.From, p.To)
			if err != nil {
				return false, err
			}
			ids := make(map[string]*Block, len(bs))
			for i := range bs {
				ids[bs[i].Ref.ID()] = &bs[i]
			}
			i = len(out.covers)
			index[sp] = i
			out.covers = append(out.covers, ids)
		}
		out.of[string(key[1:])] = i
		return true, nil
	})
	return out, err
}
