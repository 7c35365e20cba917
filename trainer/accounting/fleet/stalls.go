package fleet

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sigdata/sig/trainer/accounting/stall"
)

// Labels of StallByCause.ByClient's columns that are not a client.
const (
	// AheadReader: reader-side stall (the constant input_stall).
	AheadReader = "(reader)"
	// AheadNone: SIG-side stall with no work ahead (the waiting job's own
	// work was running).
	AheadNone = "(none)"
)

// StallByCause is the fleet's input stall charged by the real ledger
// (trainer/accounting/stall.Compute), job by job, and summed: by cause
// kind, and by the waiting job's client and the client whose SIG work was
// ahead. Stall is in simulated chip-hours (a job's stalled time × its
// slice's chips); Waited is in job-hours.
type StallByCause struct {
	// InputStall is the fleet's input stall as the goodput accounting
	// measured it; ByKind and every row of ByClient sum to it.
	InputStall float64 `json:"input_stall_chip_hours"`
	// ByKind is the stall by cause kind (stall.Kinds).
	ByKind map[stall.Kind]float64 `json:"by_kind_chip_hours"`
	// ByClient is the stall by waiting job's client, then by the client
	// whose work the ledger named as ahead (Cause.Client), AheadNone for
	// SIG-side stall with nothing ahead, AheadReader for reader-side.
	ByClient map[string]map[string]float64 `json:"by_client_chip_hours"`
	// Waited is the time jobs waited for data pending in SIG, stalled or
	// on a transient hold, by waiting client and client ahead (the
	// work that weighed most when the wait began, stall.Dominant): the
	// wait whether or not chips were kept, which with hold_after 0 is all
	// hold and no stall.
	Waited map[string]map[string]float64 `json:"waited_job_hours"`
}

// Charged sums ByKind (equal to InputStall up to rounding).
func (a StallByCause) Charged() float64 {
	var s float64
	for _, k := range slices.Sorted(maps.Keys(a.ByKind)) {
		s += a.ByKind[k]
	}
	return s
}

// SIGShare is the part of the charged stall on SIG's side.
func (a StallByCause) SIGShare() float64 {
	var sig, all float64
	for _, k := range slices.Sorted(maps.Keys(a.ByKind)) {
		all += a.ByKind[k]
		if k.SIG() {
			sig += a.ByKind[k]
		}
	}
	if all == 0 {
		return 0
	}
	return sig / all
}

// Add adds b's stall and waits to a (pooling seeds).
func (a *StallByCause) Add(b StallByCause) {
	a.InputStall += b.InputStall
	for _, k := range slices.Sorted(maps.Keys(b.ByKind)) {
		a.addKind(k, b.ByKind[k])
	}
	addMatrix(&a.ByClient, b.ByClient)
	addMatrix(&a.Waited, b.Waited)
}

func addMatrix(dst *map[string]map[string]float64, src map[string]map[string]float64) {
	for _, r := range slices.Sorted(maps.Keys(src)) {
		for _, c := range slices.Sorted(maps.Keys(src[r])) {
			addCell(dst, r, c, src[r][c])
		}
	}
}

func addCell(m *map[string]map[string]float64, row, col string, v float64) {
	if *m == nil {
		*m = map[string]map[string]float64{}
	}
	if (*m)[row] == nil {
		(*m)[row] = map[string]float64{}
	}
	(*m)[row][col] += v
}

func (a *StallByCause) addKind(k stall.Kind, v float64) {
	if a.ByKind == nil {
		a.ByKind = map[stall.Kind]float64{}
	}
	a.ByKind[k] += v
}

// Columns are a matrix's column labels (ByClient's, Waited's): clients by
// name, then AheadNone, then AheadReader.
func Columns(m map[string]map[string]float64) []string {
	set := map[string]bool{}
	for _, row := range m {
		for c := range row {
			set[c] = true
		}
	}
	rank := func(c string) int {
		switch c {
		case AheadNone:
			return 1
		case AheadReader:
			return 2
		}
		return 0
	}
	return slices.SortedFunc(maps.Keys(set), func(x, y string) int {
		return cmp.Or(cmp.Compare(rank(x), rank(y)), cmp.Compare(x, y))
	})
}

// The simulation's ledger of one job: stall intervals and waits since the
// job's slice last changed (a ledger is wall time; chip-hours are its
// lines × the slice's chips).
type jobLedger struct {
	in    stall.Input
	chips int
}

// simTime is a simulated instant as the ledger's time.
func (s *sim) simTime(d time.Duration) time.Time { return s.start.Add(d) }

// stallBegin opens a stall interval of j at now (the goodput interval is
// opened by the caller).
func (s *sim) stallBegin(j *simJob) {
	j.stalling, j.stallFrom = true, s.now
}

// stallEnd closes j's open stall interval at at.
func (s *sim) stallEnd(j *simJob, at time.Duration) {
	if !j.stalling {
		return
	}
	j.stalling = false
	if i := j.sigWait; i >= 0 {
		// The wait stops counting when the stall does (the data came, or
		// the job held or was preempted and will ask again).
		j.sigWait = -1
		if w := &j.led.in.Waits[i]; w.End.After(s.simTime(at)) {
			w.End = s.simTime(at)
		}
	}
	if at > j.stallFrom {
		j.led.in.Stalls = append(j.led.in.Stalls, stall.Interval{Start: s.simTime(j.stallFrom), End: s.simTime(at)})
	}
}

// readerStall records the constant reader-side stall [from, to) of an
// epoch: a stall interval and a reader-side wait covering it. The
// simulation does not model the readers' phases; its constant stall is
// charged to reader_fetch.
func (s *sim) readerStall(j *simJob, from, to time.Duration) {
	iv := stall.Interval{Start: s.simTime(from), End: s.simTime(to)}
	j.led.in.Stalls = append(j.led.in.Stalls, iv)
	j.led.in.Waits = append(j.led.in.Waits, stall.Wait{Start: iv.Start, End: iv.End, Who: "hosts",
		Unit: j.name, Kind: stall.ReaderFetch, Reader: "readers"})
}

// sigWait records that j's next epoch's data is pending in SIG from now
// for d, with sigd's explanation at now: queued behind the SIG work of the
// jobs ahead of it (aheadOf), or running when none is.
func (s *sim) sigWait(j *simJob, d time.Duration) {
	j.epochs++
	comp, block := "epoch data of "+j.name, fmt.Sprintf("epoch%d", j.epochs)
	ahead := s.aheadOf(j)
	at := s.simTime(s.now)
	e := stall.Explanation{At: at, Component: comp, Block: block, Kind: stall.Running, Ahead: ahead}
	col := AheadNone
	if top, _, ok := stall.Dominant(ahead); ok {
		e.Kind, col = stall.Queued, top.Client
	}
	j.led.in.Explanations = append(j.led.in.Explanations, e)
	j.led.in.Waits = append(j.led.in.Waits, stall.Wait{Start: at, End: at.Add(d), Who: "controller",
		Unit: block, Component: comp, Block: block})
	j.sigWait = len(j.led.in.Waits) - 1
	addCell(&s.res.Stall.Waited, j.client, col, d.Hours())
}

// aheadOf is the SIG work ahead of j's: the jobs SIG serves first. Those
// are the other jobs in initial training that hold their slice (their
// data is what SIG is making now) at a higher priority than j's; when
// there are none, those at j's priority that arrived before j (first in,
// first out within a priority). Each job's work weighs its slice's chips
// (a job asks SIG for data at the rate its slice consumes it), summed by
// (client, priority).
func (s *sim) aheadOf(j *simJob) []stall.Ahead {
	higher, same := map[stall.Ahead]int{}, map[stall.Ahead]int{}
	for _, o := range s.jobs {
		if o == j || o.done || o.caughtUp || s.sched.State(o.name) != Running {
			continue
		}
		k := stall.Ahead{Client: o.client, Priority: int32(o.priority)}
		switch {
		case o.priority > j.priority:
			higher[k] += o.slice
		case o.priority == j.priority && o.index < j.index:
			same[k] += o.slice
		}
	}
	m := higher
	if len(m) == 0 {
		m = same
	}
	var out []stall.Ahead
	for k, n := range m {
		k.Tasks = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b stall.Ahead) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Client, b.Client))
	})
	return out
}

// flushLedger charges j's stall since its slice last changed through
// stall.Compute and adds it to the fleet's StallByCause.
func (s *sim) flushLedger(j *simJob) {
	led := stall.Compute(j.led.in)
	chips := float64(j.led.chips)
	for _, ln := range led.Lines {
		h := ln.Charged.Hours() * chips
		s.res.Stall.addKind(ln.Cause.Kind, h)
		col := ln.Cause.Client
		switch {
		case ln.Cause.Kind.Reader():
			col = AheadReader
		case col == "":
			col = AheadNone
		}
		addCell(&s.res.Stall.ByClient, j.client, col, h)
	}
	j.led = jobLedger{chips: j.slice}
}
