package control

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/warehouse/blockref"
)

// The scripts in testdata/ drive a Machine through
// github.com/cockroachdb/datadriven. A script starts with a
// "config key=value ..." case (no output); then every event case is fed to
// the machine and followed by the expected output: one line per action,
// then the machine's state (Describe). '#' lines are comments. Another
// config case starts a new machine, its clock back at the start. "at=5s"
// among the args sets the event time (offset from the machine's start);
// times only move forward. Run go test -rewrite to regenerate the expected
// output after a deliberate change, then review the diff.
//
// Event syntax (see parseEvent):
//
//	start | setup-done [err=...] [permanent] | restored [units=(a, b)] [epochs=N] [phase=P] [err=...]
//	blocks b1 b2:pending b3@2 c/b4*10/b5@2*20 ... [snap=N] [err=...] | chips-granted | model-restored [err=...] | compiled [err=...] [permanent]
//	host-joined H [inc=I] | host-lost H [inc=I]
//	request H a=N [max=N] | unit-read H a=N U rows=R | unit-failed H a=N U [pending] [err=...]
//	batch H a=N seq=S n=E [U=R ...] [final] | step-done a=N [nan] [err=...] [permanent]
//	checkpoint-done a=N [err=...]
//	preempt deadline=+D [scope=H] | release [id=N] | tick
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var m *Machine
		now := epoch0
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "config" {
				cfg, err := parseConfig(td.CmdArgs)
				if err != nil {
					td.Fatalf(t, "%v", err)
				}
				m, now = New(cfg), epoch0
				return ""
			}
			if m == nil {
				td.Fatalf(t, "event before config")
			}
			ev, err := parseEvent(td, &now)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			var got []string
			for _, a := range m.Handle(ev) {
				got = append(got, a.String())
			}
			got = append(got, m.Describe())
			return strings.Join(got, "\n")
		})
	})
}

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func parseConfig(args []datadriven.CmdArg) (Config, error) {
	var c Config
	for _, a := range args {
		k, v := a.Key, strings.Join(a.Vals, ",")
		n, err := strconv.Atoi(v)
		if err != nil && k != "follow" && k != "retrain" && k != "hold-after" {
			return c, fmt.Errorf("config %s: %v", a, err)
		}
		switch k {
		case "hosts":
			c.Hosts = n
		case "epoch-units":
			c.EpochUnits = n
		case "caught-up-epoch-units":
			c.CaughtUpEpochUnits = n
		case "chips":
			c.Chips = n
		case "caught-up-chips":
			c.CaughtUpChips = n
		case "max-attempts":
			c.MaxAttempts = n
		case "follow":
			c.Follow = true
		case "hold-after":
			d, err := time.ParseDuration(v)
			if err != nil {
				return c, fmt.Errorf("config %s: %v", a, err)
			}
			c.HoldAfter = d
		case "retrain":
			p, ok := ParseRetrainPolicy(v)
			if !ok {
				return c, fmt.Errorf("config %s: unknown retrain policy", a)
			}
			c.Retrain = p
		default:
			return c, fmt.Errorf("unknown config %q", k)
		}
	}
	return c, nil
}

func parseEvent(td *datadriven.TestData, now *time.Time) (Event, error) {
	kinds := map[string]EventKind{}
	for k, n := range eventNames {
		kinds[n] = k
	}
	kind, ok := kinds[td.Cmd]
	if !ok {
		return Event{}, fmt.Errorf("unknown event %q", td.Cmd)
	}
	ev := Event{Kind: kind}
	if a, ok := td.Arg("at"); ok {
		if len(a.Vals) != 1 {
			return ev, fmt.Errorf("argument %q takes one value", a)
		}
		d, err := time.ParseDuration(a.Vals[0])
		if err != nil {
			return ev, err
		}
		if t := epoch0.Add(d); t.After(*now) {
			*now = t
		}
	}
	var pos []string
	for _, arg := range td.CmdArgs {
		a, k := arg.String(), arg.Key
		if k == "at" {
			continue
		}
		if len(arg.Vals) == 0 {
			switch a {
			case "permanent":
				ev.Permanent = true
			case "final":
				ev.Final = true
			case "nan":
				ev.NonFinite = true
			case "pending":
				ev.Pending = true
			default:
				pos = append(pos, a)
			}
			continue
		}
		if len(arg.Vals) != 1 && k != "units" {
			return ev, fmt.Errorf("argument %q takes one value", a)
		}
		v := arg.Vals[0]
		num := func() int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }
		switch k {
		case "err":
			ev.Err = v
		case "inc":
			ev.Incarnation = v
		case "a":
			ev.Attempt = uint64(num())
		case "max":
			ev.Max = int(num())
		case "rows":
			ev.Rows = num()
		case "seq":
			ev.Seq = uint64(num())
		case "n":
			ev.Examples = int(num())
		case "units":
			for _, u := range arg.Vals {
				ev.Progress.Units = append(ev.Progress.Units, blockref.Parse(u))
			}
		case "epochs":
			ev.Progress.Epochs = int(num())
		case "snap":
			ev.Snapshot = num()
		case "phase":
			p, err := ParsePhase(v)
			if err != nil {
				return ev, err
			}
			ev.Progress.Phase = p
		case "deadline":
			d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
			if err != nil {
				return ev, err
			}
			ev.Deadline = now.Add(d)
		case "scope":
			ev.Scope = v
		case "id":
			ev.HoldID = uint64(num())
		default:
			if ev.Kind != EvBatch {
				return ev, fmt.Errorf("unknown argument %q", a)
			}
			if ev.UnitRows == nil {
				ev.UnitRows = map[blockref.Ref]int64{}
			}
			ev.UnitRows[blockref.Parse(k)] = num()
		}
	}
	ev.At = *now
	switch kind {
	case EvBlocks:
		parseRef := func(p, ref string) (blockref.Ref, error) {
			id, v, _ := strings.Cut(ref, "@")
			var n int64 // none: as first sealed
			if v != "" {
				var err error
				if n, err = strconv.ParseInt(v, 10, 64); err != nil {
					return blockref.Ref{}, fmt.Errorf("block %s: version %q", p, v)
				}
			}
			return blockref.New(id, n), nil
		}
		for _, p := range pos {
			desc, state, _ := strings.Cut(p, ":")
			// A compacted block: c@v/part@v*rows/part*rows...
			f := strings.Split(desc, "/")
			ref, err := parseRef(p, f[0])
			if err != nil {
				return ev, err
			}
			b := Block{Ref: ref, Ready: state != "pending"}
			for _, part := range f[1:] {
				pr, rows, ok := strings.Cut(part, "*")
				n, err := strconv.ParseInt(rows, 10, 64)
				if !ok || err != nil {
					return ev, fmt.Errorf("block %s: part %q is not ref*rows", p, part)
				}
				r, err := parseRef(p, pr)
				if err != nil {
					return ev, err
				}
				b.Parts = append(b.Parts, Part{Ref: r, Rows: n})
			}
			ev.Blocks = append(ev.Blocks, b)
		}
	case EvHostJoined, EvHostLost, EvUnitsRequested, EvUnitRead, EvUnitFailed, EvBatch:
		if len(pos) == 0 {
			return ev, fmt.Errorf("%s: host missing", td.Cmd)
		}
		ev.Host = pos[0]
		if len(pos) > 1 {
			ev.Unit = blockref.Parse(pos[1])
		}
		if kind == EvHostJoined && ev.Incarnation == "" {
			ev.Incarnation = "1"
		}
	}
	return ev, nil
}
