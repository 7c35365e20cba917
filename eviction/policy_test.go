package eviction

import (
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/canon"
)

// TestPolicyData runs the cases of testdata/policy.txt, a
// github.com/cockroachdb/datadriven script: Policy.Decide over the
// candidates given as input, its decisions as output. go test -rewrite
// rewrites the decisions from what the code says (then read the diff).
func TestPolicyData(t *testing.T) {
	cases := 0
	datadriven.RunTest(t, "testdata/policy.txt", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "decide" {
			td.Fatalf(t, "unknown command %q", td.Cmd)
		}
		cases++
		var ttl int
		var budget, now int64
		td.ScanArgs(t, "ttl", &ttl)
		td.ScanArgs(t, "budget", &budget)
		td.ScanArgs(t, "now", &now)
		p := Policy{TTL: time.Duration(ttl) * time.Second, BudgetBytes: budget}
		var cands []Candidate
		names := map[canon.Key]string{}
		for _, l := range strings.Split(td.Input, "\n") {
			// A candidate is a datadriven line: its name, then key=value.
			name, args, err := datadriven.ParseLine(l)
			if err != nil || name == "" {
				td.Fatalf(t, "bad candidate %q: %v", l, err)
			}
			cand := datadriven.TestData{Pos: td.Pos, CmdArgs: args}
			c := Candidate{Component: nameKey(name)}
			names[c.Component] = name
			var last int64
			cand.ScanArgs(t, "last", &last)
			cand.ScanArgs(t, "bytes", &c.Bytes)
			cand.ScanArgs(t, "blocks", &c.Blocks)
			c.LastRequested = time.Unix(last, 0)
			cands = append(cands, c)
		}
		var got []string
		for _, d := range p.Decide(time.Unix(now, 0), cands) {
			got = append(got, names[d.Component]+" "+d.Reason)
		}
		if len(got) == 0 {
			return "none"
		}
		return strings.Join(got, "\n")
	})
	if !t.Failed() && cases < 8 {
		t.Fatalf("only %d cases", cases)
	}
}

// nameKey is a key standing for a candidate's name: the name's bytes, so
// that keys sort as the names do (ties are broken by key).
func nameKey(name string) canon.Key {
	var k canon.Key
	copy(k[:], name)
	return k
}
