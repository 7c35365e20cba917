package insertion

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
)

// TestDecideData runs testdata/decide.txt, a datadriven script: each case
// is one model input as DSL and the policy's inputs as arguments, the
// output its cover (the residual readers run, each memo node's cone), the
// reason and the estimates. go test -rewrite rewrites the outputs from
// what the code decides (then read the diff).
//
// Arguments: users=N (pipelines needing every node; default 1),
// shared=OP:N (the first node of op OP, bottom-up, and its cone are needed
// by N pipelines), cost=CLASS:NS and bytes=OP:B (measured statistics of
// the nodes of op OP), override=always|never, policy=all (MemoizeAll),
// rows=N (BlockRows), memoized=OP (the nodes of op OP have memo objects).
func TestDecideData(t *testing.T) {
	datadriven.RunTest(t, "testdata/decide.txt", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "decide" {
			td.Fatalf(t, "unknown command %q", td.Cmd)
		}
		c, comp := canonInput(t, td.Input)
		in, cfg := Input{}, Config{}
		users := 1
		shared := map[string]int{}
		cost := map[string]float64{}
		bytes := map[string]float64{}
		memoized := map[string]bool{}
		for _, a := range td.CmdArgs {
			for _, v := range a.Vals {
				switch a.Key {
				case "users":
					users = int(number(t, td, a.Key, v))
				case "shared":
					op, n := opNumber(t, td, a.Key, v)
					shared[op] = int(n)
				case "cost":
					op, n := opNumber(t, td, a.Key, v)
					cost[op] = n
				case "bytes":
					op, n := opNumber(t, td, a.Key, v)
					bytes[op] = n
				case "override":
					o, err := ParseOverride(v)
					if err != nil {
						td.Fatalf(t, "%v", err)
					}
					in.Override = o
				case "policy":
					cfg.MemoizeAll = v == "all"
				case "rows":
					in.BlockRows = number(t, td, a.Key, v)
				case "memoized":
					memoized[v] = true
				default:
					td.Fatalf(t, "unknown argument %q", a.Key)
				}
			}
		}
		pos := map[int]int{} // canonical index -> index in in.Nodes
		for x, i := range comp.Nodes {
			pos[i] = x
			cn := &c.Nodes[i]
			nd := Node{Key: cn.Key, Op: cn.Op, Type: cn.Type, Users: users, BytesPerRow: bytes[cn.Op], Memoized: memoized[cn.Op]}
			var ins []transform.Type
			for _, j := range cn.Inputs {
				nd.Inputs = append(nd.Inputs, pos[j])
				ins = append(ins, c.Nodes[j].Type)
			}
			nd.OpNsPerRow = cost[OpClass(cn.Op, ins)]
			in.Nodes = append(in.Nodes, nd)
		}
		for op, k := range shared {
			for x := range in.Nodes {
				if in.Nodes[x].Op != op {
					continue
				}
				cone := c.Cone(comp.Nodes[x], "")
				for _, i := range cone.Nodes {
					in.Nodes[pos[i]].Users = max(in.Nodes[pos[i]].Users, k)
				}
				break
			}
		}
		d := Decide(in, cfg)
		if d2 := Decide(in, cfg); fmt.Sprint(d2) != fmt.Sprint(d) {
			td.Fatalf(t, "not deterministic: %+v then %+v", d, d2)
		}
		memo := map[int]bool{}
		var b strings.Builder
		for _, x := range d.Memo {
			memo[comp.Nodes[x]] = true
		}
		switch {
		case d.Whole:
			b.WriteString("cover: whole component\n")
		case len(d.Memo) == 0:
			b.WriteString("cover: none (readers compute from raw columns)\n")
		default:
			fmt.Fprintf(&b, "cover: readers run %s\n", c.ResidualDSL(comp, memo))
			for _, x := range d.Memo {
				cone := c.Cone(comp.Nodes[x], "out")
				fmt.Fprintf(&b, "memo %s: %s\n", cone.Key.Short(), strings.TrimPrefix(c.DSL(&cone, "out"), "input out = "))
			}
		}
		fmt.Fprintf(&b, "reason: %s\n", d.Reason)
		fmt.Fprintf(&b, "estimates: reader %.1f ns/row, worker %.1f ns/row, %.1f B/row\n", d.ReaderNsPerRow, d.WorkerNsPerRow, d.BytesPerRow)
		return b.String()
	})
}

// number reads a plain number argument (users=N, rows=N); anything else
// fails the case, so a mistyped argument cannot silently take the default.
func number(t *testing.T, td *datadriven.TestData, key, v string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		td.Fatalf(t, "%s=%q: want a number", key, v)
	}
	return f
}

// opNumber reads an OP:N argument (shared=, cost=, bytes=).
func opNumber(t *testing.T, td *datadriven.TestData, key, v string) (string, float64) {
	t.Helper()
	op, num, ok := strings.Cut(v, ":")
	if !ok || op == "" {
		td.Fatalf(t, "%s=%q: want OP:N", key, v)
	}
	return op, number(t, td, key, num)
}

func canonInput(t *testing.T, src string) (*canon.Canonical, *canon.Component) {
	t.Helper()
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.Canonicalize(g, transform.AdsSchema(), transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Components) != 1 {
		t.Fatalf("want one model input, got %d", len(c.Components))
	}
	return c, &c.Components[0]
}

// TestParseOverride: the three words and the empty default; anything else
// is an error naming the value.
func TestParseOverride(t *testing.T) {
	for s, want := range map[string]Override{"": Auto, "auto": Auto, "always": Always, "never": Never} {
		if o, err := ParseOverride(s); err != nil || o != want || (s != "" && o.String() != s) {
			t.Errorf("ParseOverride(%q) = %v, %v", s, o, err)
		}
	}
	if _, err := ParseOverride("sometimes"); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("ParseOverride(sometimes): %v", err)
	}
}
