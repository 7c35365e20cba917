package memo

import (
	"context"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Reclaim at the next pack (issue 28). A block's memo columns are computed
// by many batches over time (a pipeline submitted today adds components to
// blocks memoized last week), each writing a pack: a unit reading ten
// inputs would read as many packs as batches computed them. A task's
// description lists the ready columns already in packs of its raw block
// version (Task.repack, matching.Memos.Repack); a batch copies them into
// the pack it writes, next to its own columns, and its completion names
// them (workers.Result.Moved), so that sigd switches each entry still
// naming the column's old pack to the new one. The old packs' live
// columns then all live in the new pack, and a pack's dead columns (an
// evicted or recomputed member's) are not carried: only entries sigd
// listed as ready are. Copying is optional: a column that cannot be read
// is left where it is.

// sibling is a column of Task.repack read for copying: its entry, and its
// value widened to its declared type.
type sibling struct {
	from  *sigv1.PackedMember
	key   canon.Key
	block blockref.Memo
	value arrow.Array
}

// readSiblings reads the columns the group's tasks list in Task.repack
// that are in packs of the group's raw version meta and are not of a
// component the group computes, each once, one read per pack. A pack
// that fails to read, or a column that fails the member check, is
// skipped. The caller releases the values.
func (r *Runner) readSiblings(ctx context.Context, g *group, meta block.Meta) []sibling {
	dir := block.PackDir(meta.Source, meta.Ref())
	byPack := map[string][]*sigv1.PackedMember{}
	var packs []string
	seen := map[string]bool{}
	for _, bt := range g.tasks {
		for _, pm := range bt.spec.GetRepack() {
			k, err := canon.ParseKey(pm.GetComponentKey())
			if err != nil || g.keys[k] || len(pm.GetMemoObject()) <= len(dir) || pm.GetMemoObject()[:len(dir)] != dir {
				continue
			}
			id := pm.GetComponentKey() + "/" + pm.GetBlockId()
			if seen[id] {
				continue
			}
			seen[id] = true
			if _, ok := byPack[pm.GetMemoObject()]; !ok {
				packs = append(packs, pm.GetMemoObject())
			}
			byPack[pm.GetMemoObject()] = append(byPack[pm.GetMemoObject()], pm)
		}
	}
	var out []sibling
	for _, object := range packs {
		if ctx.Err() != nil {
			break
		}
		pm, err := block.ReadFooter(ctx, r.Store, object)
		if err != nil || pm.ID != meta.ID || pm.Ref() != meta.Ref() {
			continue
		}
		var names []string
		var want []sibling
		for _, m := range byPack[object] {
			k, _ := canon.ParseKey(m.GetComponentKey())
			mb := blockref.NewMemo(m.GetBlockId(), m.GetInputVersion())
			c, ok := pm.Column(m.GetMemoColumn())
			if !ok {
				continue
			}
			if _, err := block.CheckMember(pm, m.GetMemoColumn(), k, mb, c.Type, meta.Rows); err != nil {
				continue
			}
			names = append(names, c.Name)
			want = append(want, sibling{from: m, key: k, block: mb})
		}
		if len(names) == 0 {
			continue
		}
		rec, err := block.ReadColumns(ctx, r.Store, pm, names)
		if err != nil {
			continue
		}
		for i := range want {
			v := rec.Column(i + 1) // after event_id
			v.Retain()
			want[i].value = v
			out = append(out, want[i])
		}
		rec.Release()
	}
	return out
}
