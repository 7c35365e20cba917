package stall

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// The scripts in testdata/ build an Input case by case and charge it:
//
//	stall FROM TO                          a measured input-stall interval
//	wait FROM TO|open who=H unit=U [input=I] component=C block=B [kind=reader_*] [reader=R]
//	explain AT component=C block=B kind=K [ahead=client:prio:n,...] [running=D] [detail=...]
//	charge                                 prints the ledger and resets the input
//
// Times are seconds from an arbitrary origin. charge prints the stall,
// one line per cause (most charged first), the charges in time order,
// and checks that the lines sum to the stall.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var in Input
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "stall":
				in.Stalls = append(in.Stalls, Interval{at(t, td, td.CmdArgs[0].Key), at(t, td, td.CmdArgs[1].Key)})
				return ""
			case "wait":
				w := Wait{Start: at(t, td, td.CmdArgs[0].Key)}
				if td.CmdArgs[1].Key != "open" {
					w.End = at(t, td, td.CmdArgs[1].Key)
				}
				for _, a := range td.CmdArgs[2:] {
					v := a.SingleVal(t)
					switch a.Key {
					case "who":
						w.Who = v
					case "unit":
						w.Unit = v
					case "input":
						w.Input = v
					case "component":
						w.Component = v
					case "block":
						w.Block = v
					case "reader":
						w.Reader = v
					case "kind":
						k, err := ParseKind(v)
						if err != nil {
							td.Fatalf(t, "%v", err)
						}
						w.Kind = k
					default:
						td.Fatalf(t, "unknown wait argument %s", a.Key)
					}
				}
				in.Waits = append(in.Waits, w)
				return ""
			case "explain":
				e := Explanation{At: at(t, td, td.CmdArgs[0].Key)}
				for _, a := range td.CmdArgs[1:] {
					switch a.Key {
					case "component":
						e.Component = a.SingleVal(t)
					case "block":
						e.Block = a.SingleVal(t)
					case "kind":
						k, err := ParseKind(a.SingleVal(t))
						if err != nil {
							td.Fatalf(t, "%v", err)
						}
						e.Kind = k
					case "running":
						d, err := time.ParseDuration(a.SingleVal(t))
						if err != nil {
							td.Fatalf(t, "%v", err)
						}
						e.Running = d
					case "detail":
						e.Detail = a.SingleVal(t)
					case "ahead":
						for _, v := range a.Vals {
							p := strings.Split(v, ":")
							if len(p) != 3 {
								td.Fatalf(t, "ahead %q: want client:priority:tasks", v)
							}
							prio, err1 := strconv.Atoi(p[1])
							n, err2 := strconv.Atoi(p[2])
							if err1 != nil || err2 != nil {
								td.Fatalf(t, "ahead %q: want client:priority:tasks", v)
							}
							e.Ahead = append(e.Ahead, Ahead{Client: p[0], Priority: int32(prio), Tasks: n})
						}
					default:
						td.Fatalf(t, "unknown explain argument %s", a.Key)
					}
				}
				in.Explanations = append(in.Explanations, e)
				return ""
			case "charge":
				led := Compute(in)
				in = Input{}
				if led.Charged() != led.Stall {
					t.Errorf("%s: lines sum to %v, stall is %v", td.Pos, led.Charged(), led.Stall)
				}
				return format(led)
			}
			td.Fatalf(t, "unknown command %s", td.Cmd)
			return ""
		})
	})
}

var origin = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)

func at(t *testing.T, td *datadriven.TestData, s string) time.Time {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		td.Fatalf(t, "time %q: %v", s, err)
	}
	return origin.Add(time.Duration(f * float64(time.Second)))
}

func secs(t time.Time) string {
	return strconv.FormatFloat(t.Sub(origin).Seconds(), 'f', -1, 64)
}

func format(led Ledger) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stall %v\n", led.Stall)
	for _, ln := range led.Lines {
		fmt.Fprintf(&b, "%v %s", ln.Charged, ln.Cause)
		if ln.Ahead > 0 {
			fmt.Fprintf(&b, " ahead=%d of=%d", ln.Ahead, ln.AheadOf)
		}
		b.WriteString("\n")
	}
	for _, c := range led.Charges {
		fmt.Fprintf(&b, "  %s-%s %s\n", secs(c.Start), secs(c.End), c.Cause)
	}
	return b.String()
}

// TestOrderIndependent: the ledger does not depend on the order of the
// input's slices.
func TestOrderIndependent(t *testing.T) {
	s := func(a, b float64) (time.Time, time.Time) {
		return origin.Add(time.Duration(a * float64(time.Second))), origin.Add(time.Duration(b * float64(time.Second)))
	}
	a0, a1 := s(0, 10)
	b0, b1 := s(2, 10)
	c0, c1 := s(12, 20)
	in := Input{
		Stalls: []Interval{{c0, c1}, {a0, a1}},
		Waits: []Wait{
			{Start: a0, End: a1, Who: "h1", Unit: "b1", Component: "x", Block: "b1"},
			{Start: b0, End: b1, Who: "h0", Unit: "b1", Component: "y", Block: "b1"},
			{Start: c0, End: c1, Who: "h0", Unit: "b2", Component: "b2", Block: "b2", Kind: ReaderFetch},
		},
	}
	want := format(Compute(in))
	in.Waits[0], in.Waits[2] = in.Waits[2], in.Waits[0]
	in.Stalls[0], in.Stalls[1] = in.Stalls[1], in.Stalls[0]
	if got := format(Compute(in)); got != want {
		t.Fatalf("order changed the ledger:\n%s\nwant\n%s", got, want)
	}
}

// TestComputeIgnoresInputOrder: the ledger is a function of its input's
// contents, not their order, even where two of sigd's answers about one
// entry carry the same instant and two reader-side waits agree on all but
// their kind and reader (both would otherwise fall to the input's order).
func TestComputeIgnoresInputOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	in := Input{
		Stalls: []Interval{{Start: at(0), End: at(20)}},
		Waits: []Wait{
			{Start: at(0), End: at(10), Who: "h0", Unit: "u", Component: "c", Block: "b"},
			{Start: at(10), End: at(20), Who: "h1", Unit: "u", Component: "c", Block: "b2", Kind: ReaderFetch, Reader: "r1"},
			{Start: at(10), End: at(20), Who: "h1", Unit: "u", Component: "c", Block: "b2", Kind: ReaderSend, Reader: "r2"},
		},
		Explanations: []Explanation{
			{At: at(1), Component: "c", Block: "b", Kind: Queued, Ahead: []Ahead{{Client: "ranking", Priority: 900, Tasks: 3}}},
			{At: at(1), Component: "c", Block: "b", Kind: Running, Running: time.Second},
		},
	}
	want := Compute(in)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		p := Input{Stalls: in.Stalls, Waits: slices.Clone(in.Waits), Explanations: slices.Clone(in.Explanations)}
		rng.Shuffle(len(p.Waits), func(i, j int) { p.Waits[i], p.Waits[j] = p.Waits[j], p.Waits[i] })
		rng.Shuffle(len(p.Explanations), func(i, j int) { p.Explanations[i], p.Explanations[j] = p.Explanations[j], p.Explanations[i] })
		if got := Compute(p); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled input %+v:\ngot  %+v\nwant %+v", p, got, want)
		}
	}
}
