package eviction

import (
	"bytes"
	"sort"
	"time"

	"github.com/sigdata/sig/canon"
)

// Candidate is a component with memoized data, as the policy sees it.
type Candidate struct {
	Component     canon.Key
	LastRequested time.Time
	Bytes         int64 // ready memoized bytes
	Blocks        int   // memo entries of any state
}

// Policy configures last-requested eviction.
type Policy struct {
	// TTL evicts components not requested for longer. 0 disables it.
	TTL time.Duration
	// BudgetBytes, if positive, evicts the least recently requested
	// components until the memoized bytes fit.
	BudgetBytes int64
}

// Decision is what to evict and why.
type Decision struct {
	Component canon.Key
	Reason    string // "ttl" or "budget"
}

// Decide returns the components to evict at now, in the order to evict
// them: every component idle longer than the TTL (oldest first), then, if
// the rest exceeds the budget, the least recently requested until it fits.
// Ties are broken by component key, so the result is deterministic.
func (p Policy) Decide(now time.Time, cands []Candidate) []Decision {
	cs := append([]Candidate(nil), cands...)
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].LastRequested.Equal(cs[j].LastRequested) {
			return cs[i].LastRequested.Before(cs[j].LastRequested)
		}
		return bytes.Compare(cs[i].Component[:], cs[j].Component[:]) < 0
	})
	var out []Decision
	var total int64
	kept := cs[:0:0]
	for _, c := range cs {
		if c.Blocks == 0 {
			continue
		}
		if p.TTL > 0 && now.Sub(c.LastRequested) > p.TTL {
			out = append(out, Decision{c.Component, "ttl"})
			continue
		}
		kept = append(kept, c)
		total += c.Bytes
	}
	if p.BudgetBytes > 0 {
		for _, c := range kept {
			if total <= p.BudgetBytes {
				break
			}
			out = append(out, Decision{c.Component, "budget"})
			total -= c.Bytes
		}
	}
	return out
}
