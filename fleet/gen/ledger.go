package gen

import (
	"fmt"
	"slices"
)

// Ledger is the independent count of what a matching cache must answer to
// a sequence of submissions, each memoized whole before the next (doc.go,
// "Ledger"). Components and blocks are opaque names: canonical keys and
// catalog block ids for fleet/run, component names and slots for Plan.
type Ledger struct {
	components map[string]bool
	requested  map[[2]string]bool
	pairs      [][2]string          // requested pairs, in first-request order
	added      int                  // pairs[added:] are the last submission's new ones
	reg        map[string]ledgerReg // a pipeline's latest registration
}

type ledgerReg struct {
	components, blocks []string
}

// Submission is one submit: the pipeline ("client/name"), the distinct
// components of its graph and the blocks its range covers.
type Submission struct {
	Pipeline   string
	Components []string
	Blocks     []string
}

// Count is what one submission asks for and finds.
type Count struct {
	Components    int `json:"components"`
	ComponentHits int `json:"component_hits"`
	// Blocks are (component, block) pairs; BlockHits those an earlier
	// submission asked for (so memoized before this one).
	Blocks    int `json:"blocks"`
	BlockHits int `json:"block_hits"`
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{components: map[string]bool{}, requested: map[[2]string]bool{}, reg: map[string]ledgerReg{}}
}

// Submit records a submission and returns its count. The pipeline's
// registration becomes this one (a re-submit replaces the range and graph).
func (l *Ledger) Submit(s Submission) Count {
	var c Count
	l.added = len(l.pairs)
	comps := uniq(s.Components)
	blocks := uniq(s.Blocks)
	for _, k := range comps {
		c.Components++
		if l.components[k] {
			c.ComponentHits++
		}
	}
	for _, k := range comps {
		l.components[k] = true
		for _, b := range blocks {
			p := [2]string{k, b}
			c.Blocks++
			if l.requested[p] {
				c.BlockHits++
				continue
			}
			l.requested[p] = true
			l.pairs = append(l.pairs, p)
		}
	}
	l.reg[s.Pipeline] = ledgerReg{components: comps, blocks: blocks}
	return c
}

// Added returns the pairs the last submission asked for first: those its
// memoization computed.
func (l *Ledger) Added() [][2]string { return l.pairs[l.added:] }

// Registered returns a pipeline's latest registration: its components and
// the blocks its range covers.
func (l *Ledger) Registered(pipeline string) (components, blocks []string) {
	r := l.reg[pipeline]
	return r.components, r.blocks
}

// Users returns, for every pair ever requested (all memoized), how many
// pipelines use it: those whose latest registration has the component and
// covers the block. Pairs are in first-request order.
func (l *Ledger) Users() (pairs [][2]string, users []int) {
	n := map[[2]string]int{}
	for _, r := range l.reg {
		for _, k := range r.components {
			for _, b := range r.blocks {
				n[[2]string{k, b}]++
			}
		}
	}
	users = make([]int, len(l.pairs))
	for i, p := range l.pairs {
		users[i] = n[p]
	}
	return l.pairs, users
}

// Histogram turns per-pair user counts into the distribution sigd's Stats
// reports: element n is the number of pairs used by n pipelines.
func Histogram(users []int) []int64 {
	var h []int64
	for _, u := range users {
		for len(h) <= u {
			h = append(h, 0)
		}
		h[u]++
	}
	return h
}

func uniq(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// PlanEpoch is what Plan counts for one epoch.
type PlanEpoch struct {
	Epoch int `json:"epoch"`
	// Submitted are the pipelines that have arrived so far; Active those
	// training in the epoch.
	Submitted int `json:"submitted"`
	Active    int `json:"active"`
	// Initial and CaughtUp sum the counts of the epoch's submissions.
	Initial  Count `json:"initial"`
	CaughtUp Count `json:"caught_up"`
}

// PlanSummary is what a fleet implies, counted by a Ledger over its
// steps with a slot for a block.
type PlanSummary struct {
	Epochs []PlanEpoch `json:"epochs"`
	// Components is the distinct components the fleet's graphs use, of
	// Population.
	Components int `json:"components"`
	Population int `json:"population"`
	// ReuseMean and ReuseMax: pipelines per memoized (component, slot).
	ReuseMean float64 `json:"reuse_mean"`
	ReuseMax  int     `json:"reuse_max"`
	// Reuse is the histogram (Histogram).
	Reuse []int64 `json:"reuse"`
}

// Plan counts the fleet's submissions with a Ledger, slots standing for
// blocks: every slot holding the same number of blocks scales the counts
// of blocks but not the hit rates or the reuse.
func (f *Fleet) Plan() PlanSummary {
	l := NewLedger()
	s := PlanSummary{Population: len(f.Components)}
	used := map[int]bool{}
	for e := range f.Config.Epochs {
		s.Epochs = append(s.Epochs, PlanEpoch{Epoch: e, Active: f.Active(e)})
	}
	for _, st := range f.Steps() {
		p := &f.Pipelines[st.Pipeline]
		sub := Submission{Pipeline: p.Client + "/" + p.Name}
		for _, j := range p.Inputs {
			used[j] = true
			sub.Components = append(sub.Components, f.Components[j].Name)
		}
		for b := st.From; b < st.To; b++ {
			sub.Blocks = append(sub.Blocks, fmt.Sprintf("slot%05d", b))
		}
		c := l.Submit(sub)
		pe := &s.Epochs[st.Epoch]
		if st.Phase == Initial {
			pe.Initial = pe.Initial.add(c)
		} else {
			pe.CaughtUp = pe.CaughtUp.add(c)
		}
	}
	for e := range s.Epochs {
		s.Epochs[e].Submitted = arrivedBy(f, e)
	}
	_, users := l.Users()
	s.Components = len(used)
	s.Reuse = Histogram(users)
	sum := 0
	for _, u := range users {
		sum += u
		s.ReuseMax = max(s.ReuseMax, u)
	}
	if len(users) > 0 {
		s.ReuseMean = float64(sum) / float64(len(users))
	}
	return s
}

func arrivedBy(f *Fleet, e int) int {
	n := 0
	for i := range f.Pipelines {
		if f.Pipelines[i].Arrive <= e {
			n++
		}
	}
	return n
}

func (c Count) add(d Count) Count {
	return Count{c.Components + d.Components, c.ComponentHits + d.ComponentHits, c.Blocks + d.Blocks, c.BlockHits + d.BlockHits}
}

// BlockHitRate is BlockHits / Blocks (0 without blocks).
func (c Count) BlockHitRate() float64 {
	if c.Blocks == 0 {
		return 0
	}
	return float64(c.BlockHits) / float64(c.Blocks)
}

// ComponentHitRate is ComponentHits / Components (0 without components).
func (c Count) ComponentHitRate() float64 {
	if c.Components == 0 {
		return 0
	}
	return float64(c.ComponentHits) / float64(c.Components)
}
