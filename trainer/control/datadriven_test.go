package control

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// The scripts in testdata/ drive a Machine. A script starts with a
// "config key=value ..." line; then every "> event args" line is fed to the
// machine and followed by the expected output: one line per action, then the
// machine's state (Describe). A blank line ends a case; '#' lines are
// comments. Another config line starts a new machine, its clock back at the
// start. "@5s" among the args sets the event time (offset from the
// machine's start); times only move forward. Run with -rewrite to regenerate
// the expected output after a deliberate change, then review the diff.
//
// Event syntax (see parseEvent):
//
//	start | setup-done [err=...] [permanent] | restored [units=a,b] [epochs=N] [phase=P] [err=...]
//	blocks b1 b2:pending ... [err=...] | chips-granted | model-restored [err=...] | compiled [err=...] [permanent]
//	host-joined H [inc=I] | host-lost H [inc=I]
//	request H a=N [max=N] | unit-read H a=N U rows=R | unit-failed H a=N U [pending] [err=...]
//	batch H a=N seq=S n=E [U=R ...] [final] | step-done a=N [nan] | checkpoint-done a=N [err=...]
//	preempt deadline=+D [scope=H] | release [id=N] | tick
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var m *Machine
	now := epoch0
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	var expect []string
	var cmd string
	lineNo, cmdLine := 0, 0
	flush := func() {
		if cmd == "" {
			return
		}
		ev, err := parseEvent(cmd, &now)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, cmdLine, err)
		}
		var got []string
		for _, a := range m.Handle(ev) {
			got = append(got, a.String())
		}
		got = append(got, m.Describe())
		fmt.Fprintf(&out, "> %s\n%s\n\n", cmd, strings.Join(got, "\n"))
		if !*rewrite && strings.Join(got, "\n") != strings.Join(expect, "\n") {
			t.Errorf("%s:%d: > %s\ngot:\n  %s\nwant:\n  %s", path, cmdLine, cmd, strings.Join(got, "\n  "), strings.Join(expect, "\n  "))
		}
		cmd, expect = "", nil
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			flush()
			out.WriteString(line + "\n")
		case strings.HasPrefix(line, "config"):
			cfg, err := parseConfig(strings.Fields(line)[1:])
			if err != nil {
				t.Fatalf("%s:%d: %v", path, lineNo, err)
			}
			m, now = New(cfg), epoch0
			out.WriteString(line + "\n\n")
		case strings.HasPrefix(line, "> "):
			flush()
			if m == nil {
				t.Fatalf("%s:%d: event before config", path, lineNo)
			}
			cmd, cmdLine = strings.TrimPrefix(line, "> "), lineNo
		case strings.TrimSpace(line) == "":
			flush()
		default:
			expect = append(expect, line)
		}
	}
	flush()
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parseConfig(args []string) (Config, error) {
	var c Config
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		if err != nil && k != "follow" {
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
		default:
			return c, fmt.Errorf("unknown config %q", k)
		}
	}
	return c, nil
}

func parseEvent(line string, now *time.Time) (Event, error) {
	f := strings.Fields(line)
	kinds := map[string]EventKind{}
	for k, n := range eventNames {
		kinds[n] = k
	}
	kind, ok := kinds[f[0]]
	if !ok {
		return Event{}, fmt.Errorf("unknown event %q", f[0])
	}
	ev := Event{Kind: kind}
	for _, a := range f[1:] {
		if strings.HasPrefix(a, "@") {
			d, err := time.ParseDuration(a[1:])
			if err != nil {
				return ev, err
			}
			if t := epoch0.Add(d); t.After(*now) {
				*now = t
			}
		}
	}
	var pos []string
	for _, a := range f[1:] {
		if strings.HasPrefix(a, "@") {
			continue
		}
		k, v, kv := strings.Cut(a, "=")
		if !kv {
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
			ev.Progress.Units = strings.Split(v, ",")
		case "epochs":
			ev.Progress.Epochs = int(num())
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
				ev.UnitRows = map[string]int64{}
			}
			ev.UnitRows[k] = num()
		}
	}
	ev.At = *now
	switch kind {
	case EvBlocks:
		for _, p := range pos {
			id, state, _ := strings.Cut(p, ":")
			ev.Blocks = append(ev.Blocks, Block{ID: id, Ready: state != "pending"})
		}
	case EvHostJoined, EvHostLost, EvUnitsRequested, EvUnitRead, EvUnitFailed, EvBatch:
		if len(pos) == 0 {
			return ev, fmt.Errorf("%s: host missing", f[0])
		}
		ev.Host = pos[0]
		if len(pos) > 1 {
			ev.Unit = pos[1]
		}
		if kind == EvHostJoined && ev.Incarnation == "" {
			ev.Incarnation = "1"
		}
	}
	return ev, nil
}
