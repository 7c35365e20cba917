package matching

import (
	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
)

// Covers (issue 20): the insertion policy (matching/insertion) decides, per
// model input, which nodes of its component are memoized; the frontend
// feeds it what the cache knows — the ops' measured costs, the nodes'
// measured sizes, and each node's reuse — and stores the decision in the
// pipeline's record (PipelineInput.Cover). A cover is decided when a
// pipeline is submitted and kept until it is submitted again (fleets
// re-submit as their ranges grow), so read solutions are stable while a
// job trains; a memo node no pipeline's cover names any more is not
// scheduled again and leaves with last-requested eviction.

// Reuse counting stops at these bounds: past a few dozen pipelines, a
// node's readers' saving dwarfs any cost of memoizing it, so the exact
// count no longer changes a decision, and a submit must not scan the
// users of every component containing a popular node.
const (
	reuseScanComponents = 256
	reuseMax            = 64
)

// covers decides the cover of every model input of c for the submission.
func (f *Frontend) covers(c *canon.Canonical, req *SubmitRequest, blocks []Block) ([]*Cover, error) {
	cfg := f.cfg.Insertion
	var rows float64
	for _, b := range blocks {
		rows += float64(b.Rows)
	}
	if len(blocks) > 0 {
		rows /= float64(len(blocks))
	}
	var nodes []canon.Key
	for i := range c.Nodes {
		if c.Nodes[i].Op != "col" {
			nodes = append(nodes, c.Nodes[i].Key)
		}
	}
	stats, err := f.cfg.Cache.CostStats(nodes...)
	if err != nil {
		return nil, err
	}
	reuse := &reuseCounter{cache: f.cfg.Cache, self: [2]string{req.Client, req.Pipeline},
		users: map[canon.Key][][2]string{}, counts: map[canon.Key]int{}}
	out := make([]*Cover, len(c.Components))
	for i := range c.Components {
		comp := &c.Components[i]
		ov := req.Memoize[comp.Input]
		in := insertion.Input{Override: ov, BlockRows: rows}
		pos := make(map[int]int, len(comp.Nodes))
		for x, j := range comp.Nodes {
			pos[j] = x
			cn := &c.Nodes[j]
			nd := insertion.Node{Key: cn.Key, Op: cn.Op, Type: cn.Type, Users: 1}
			ins := make([]transform.Type, len(cn.Inputs))
			for y, k := range cn.Inputs {
				nd.Inputs = append(nd.Inputs, pos[k])
				ins[y] = c.Nodes[k].Type
			}
			nd.OpNsPerRow = stats.Ops[insertion.OpClass(cn.Op, ins)].NsPerRow()
			size := stats.Nodes[cn.Key]
			nd.BytesPerRow, nd.Memoized = size.BytesPerRow(), size.Rows > 0
			// Reuse only decides automatic covers of nodes that can be
			// memoized: spare the scans otherwise.
			if cn.Op != "col" && ov == insertion.Auto && !cfg.MemoizeAll {
				if nd.Users, err = reuse.count(cn.Key); err != nil {
					return nil, err
				}
			}
			in.Nodes = append(in.Nodes, nd)
		}
		d := insertion.Decide(in, cfg)
		cov := &Cover{Memo: []canon.Key{}, Reason: d.Reason}
		if ov != insertion.Auto {
			cov.Override = ov.String()
		}
		memo := map[int]bool{}
		for _, x := range d.Memo {
			j := comp.Nodes[x]
			memo[j] = true
			cov.Memo = append(cov.Memo, c.Nodes[j].Key)
		}
		if !d.Whole {
			cov.Residual = c.ResidualDSL(comp, memo)
		}
		out[i] = cov
	}
	return out, nil
}

// reuseCounter counts the registered pipelines whose graphs need a node:
// those using (as a model input's component or a cover's memo node) a
// component containing it, by the search index. The submitting pipeline
// counts once, registered or not.
type reuseCounter struct {
	cache  *Cache
	self   [2]string
	users  map[canon.Key][][2]string
	counts map[canon.Key]int
}

func (r *reuseCounter) count(n canon.Key) (int, error) {
	if v, ok := r.counts[n]; ok {
		return v, nil
	}
	comps, err := r.cache.ContainingNode(n, reuseScanComponents)
	if err != nil {
		return 0, err
	}
	set := map[[2]string]bool{}
	for _, k := range comps {
		us, ok := r.users[k]
		if !ok {
			if us, err = r.cache.Users(k); err != nil {
				return 0, err
			}
			r.users[k] = us
		}
		for _, u := range us {
			if u != r.self {
				set[u] = true
			}
		}
		if len(set)+1 >= reuseMax {
			break
		}
	}
	v := min(len(set)+1, reuseMax)
	r.counts[n] = v
	return v, nil
}
