package goodput

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// epoch is where ParseTimeline puts time zero, the Unix epoch in UTC. The
// text form stores only offsets, so any fixed instant would do.
var epoch = time.Unix(0, 0).UTC()

// ParseTimeline reads the text form of a Timeline, one record a line. Times
// are Go durations (0s, 1m30s, 2.5s) after the Unix epoch; '#' starts a
// comment.
//
//	capacity <chips> <start>..<end>
//	job <name> alloc <held>/<requested> <start>..<end>
//	job <name> phase <phase> <at>
//	job <name> productive <start>..<end> ideal=<duration>
//	job <name> <category> <start>..<end>    # initialization compile input_stall checkpoint_save checkpoint_restore hold idle
//	job <name> checkpoint|failure|preemption <at>
//
// Exactly one capacity line is required. Jobs appear in the order they are
// first named. The result is not validated; Compute does that.
func ParseTimeline(r io.Reader) (Timeline, error) {
	var t Timeline
	index := map[string]int{}
	haveCapacity := false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return invalid("line %d: %q: %s", n, strings.TrimSpace(line), fmt.Sprintf(format, args...))
		}
		if f[0] == "capacity" {
			if len(f) != 3 {
				return Timeline{}, bad("want: capacity <chips> <start>..<end>")
			}
			if haveCapacity {
				return Timeline{}, bad("second capacity line")
			}
			chips, err := strconv.Atoi(f[1])
			if err != nil {
				return Timeline{}, bad("chips: %v", err)
			}
			s, e, err := parseSpan(f[2])
			if err != nil {
				return Timeline{}, bad("%v", err)
			}
			t.Capacity, haveCapacity = Capacity{Chips: chips, Start: s, End: e}, true
			continue
		}
		if f[0] != "job" || len(f) < 4 {
			return Timeline{}, bad("want capacity or job <name> <record> ...")
		}
		i, ok := index[f[1]]
		if !ok {
			i = len(t.Jobs)
			index[f[1]] = i
			t.Jobs = append(t.Jobs, JobTimeline{Job: f[1]})
		}
		j := &t.Jobs[i]
		kind, args := f[2], f[3:]
		switch kind {
		case "alloc":
			if len(args) != 2 {
				return Timeline{}, bad("want: alloc <held>/<requested> <start>..<end>")
			}
			hs, rs, ok := strings.Cut(args[0], "/")
			held, err1 := strconv.Atoi(hs)
			req, err2 := strconv.Atoi(rs)
			if !ok || err1 != nil || err2 != nil {
				return Timeline{}, bad("want <held>/<requested> chips")
			}
			s, e, err := parseSpan(args[1])
			if err != nil {
				return Timeline{}, bad("%v", err)
			}
			j.Allocations = append(j.Allocations, Allocation{Start: s, End: e, Held: held, Requested: req})
		case "phase":
			if len(args) != 2 {
				return Timeline{}, bad("want: phase <name> <at>")
			}
			at, err := parseTime(args[1])
			if err != nil {
				return Timeline{}, bad("%v", err)
			}
			j.PhaseChanges = append(j.PhaseChanges, PhaseChange{At: at, Phase: args[0]})
		case "checkpoint", "failure", "preemption":
			if len(args) != 1 {
				return Timeline{}, bad("want: %s <at>", kind)
			}
			at, err := parseTime(args[0])
			if err != nil {
				return Timeline{}, bad("%v", err)
			}
			ek, _ := parseEventKind(kind)
			j.Events = append(j.Events, Event{At: at, Kind: ek})
		default:
			c, ok := ParseCategory(kind)
			if !ok || !c.Recordable() {
				return Timeline{}, bad("unknown record %q", kind)
			}
			want := 1
			if c == Productive {
				want = 2
			}
			if len(args) != want {
				return Timeline{}, bad("want: %s <start>..<end>%s", kind, map[bool]string{true: " ideal=<duration>"}[c == Productive])
			}
			s, e, err := parseSpan(args[0])
			if err != nil {
				return Timeline{}, bad("%v", err)
			}
			iv := Interval{Start: s, End: e, Category: c}
			if c == Productive {
				v, ok := strings.CutPrefix(args[1], "ideal=")
				if !ok {
					return Timeline{}, bad("want ideal=<duration>")
				}
				if iv.Ideal, err = time.ParseDuration(v); err != nil {
					return Timeline{}, bad("%v", err)
				}
			}
			j.Intervals = append(j.Intervals, iv)
		}
	}
	if err := sc.Err(); err != nil {
		return Timeline{}, err
	}
	if !haveCapacity {
		return Timeline{}, invalid("no capacity line")
	}
	return t, nil
}

func parseTime(s string) (time.Time, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, err
	}
	return epoch.Add(d), nil
}

func parseSpan(s string) (start, end time.Time, err error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		return start, end, fmt.Errorf("want <start>..<end>, got %q", s)
	}
	if start, err = parseTime(a); err != nil {
		return start, end, err
	}
	end, err = parseTime(b)
	return start, end, err
}

// FormatTimeline writes t in the text form ParseTimeline reads, with times as
// offsets from t.Capacity.Start: parsing the output gives t moved so that the
// window starts at the Unix epoch. The trainer can write it at exit so that a
// run's goodput can be recomputed and explained later.
func FormatTimeline(w io.Writer, t Timeline) error {
	origin := t.Capacity.Start
	at := func(x time.Time) string { return x.Sub(origin).String() }
	span := func(s, e time.Time) string { return at(s) + ".." + at(e) }
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "capacity %d %s\n", t.Capacity.Chips, span(t.Capacity.Start, t.Capacity.End))
	type line struct {
		at    time.Time
		order int
		text  string
	}
	for _, j := range t.Jobs {
		if !validName(j.Job) {
			return invalid("job name %q cannot be written in the text form", j.Job)
		}
		var lines []line
		for _, a := range j.Allocations {
			lines = append(lines, line{a.Start, 0, fmt.Sprintf("alloc %d/%d %s", a.Held, a.Requested, span(a.Start, a.End))})
		}
		for _, p := range j.PhaseChanges {
			if !validName(p.Phase) {
				return invalid("phase name %q cannot be written in the text form", p.Phase)
			}
			lines = append(lines, line{p.At, 1, fmt.Sprintf("phase %s %s", p.Phase, at(p.At))})
		}
		for _, iv := range j.Intervals {
			text := fmt.Sprintf("%s %s", iv.Category, span(iv.Start, iv.End))
			if iv.Category == Productive {
				text += " ideal=" + iv.Ideal.String()
			}
			lines = append(lines, line{iv.Start, 2, text})
		}
		for _, e := range j.Events {
			lines = append(lines, line{e.At, 3, fmt.Sprintf("%s %s", e.Kind, at(e.At))})
		}
		slices.SortStableFunc(lines, func(a, b line) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return cmp.Compare(a.order, b.order)
		})
		for _, l := range lines {
			fmt.Fprintf(bw, "job %s %s\n", j.Job, l.text)
		}
	}
	return bw.Flush()
}

func plainName(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n#")
}
