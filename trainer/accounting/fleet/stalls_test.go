package fleet

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sigdata/sig/trainer/accounting/stall"
)

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-6*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func rowSum(m map[string]float64) float64 {
	var s float64
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += m[k]
	}
	return s
}

// TestStallByCauseSums: whatever the constants, the stall the ledger
// charges, by kind and by (client, client ahead), sums to the fleet's
// input stall as the goodput accounting measured it; the reader column
// is the reader kinds'; nothing is unrecorded; with hold_after 0 a job
// holds at once, so SIG charges no stall (its waits are all holds).
func TestStallByCauseSums(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  SimConfig
	}{
		{"defaults", SimConfig{}},
		{"hold_after 1h", SimConfig{HoldAfter: Duration(time.Hour)}},
		{"never holds", SimConfig{HoldAfter: Duration(10000 * time.Hour)}},
		{"one high-priority client", SimConfig{HoldAfter: Duration(2 * time.Hour), Clients: []string{"ads", "feeds", "search"}, HighPriorityClients: []string{"ads"}}},
		{"no reader stall", SimConfig{HoldAfter: Duration(time.Hour), InputStall: 1e-9}},
	} {
		for seed := uint64(1); seed <= 2; seed++ {
			cfg := c.cfg
			cfg.Seed, cfg.Duration = seed, Duration(14*24*time.Hour)
			r, err := Simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a := r.Stall
			if a.InputStall <= 0 {
				t.Fatalf("%s seed %d: no input stall", c.name, seed)
			}
			if !near(a.Charged(), a.InputStall) {
				t.Errorf("%s seed %d: charged by kind %.6f chip-h, input stall %.6f", c.name, seed, a.Charged(), a.InputStall)
			}
			var byClient, reader, readerKinds float64
			for _, row := range slices.Sorted(maps.Keys(a.ByClient)) {
				byClient += rowSum(a.ByClient[row])
				reader += a.ByClient[row][AheadReader]
			}
			for _, k := range slices.Sorted(maps.Keys(a.ByKind)) {
				if k.Reader() {
					readerKinds += a.ByKind[k]
				}
			}
			if !near(byClient, a.InputStall) || !near(reader, readerKinds) {
				t.Errorf("%s seed %d: by client %.6f, input stall %.6f; reader column %.6f, reader kinds %.6f", c.name, seed, byClient, a.InputStall, reader, readerKinds)
			}
			if a.ByKind[stall.Unrecorded] != 0 {
				t.Errorf("%s seed %d: %.3f chip-h unrecorded", c.name, seed, a.ByKind[stall.Unrecorded])
			}
			if cfg.HoldAfter == 0 && a.SIGShare() != 0 {
				t.Errorf("%s seed %d: SIG share %.3f with hold_after 0", c.name, seed, a.SIGShare())
			}
			if cfg.HoldAfter > 0 && (a.SIGShare() <= 0 || len(a.Waited) == 0) {
				t.Errorf("%s seed %d: SIG share %.3f, waited %v", c.name, seed, a.SIGShare(), a.Waited)
			}
			t.Logf("%s seed %d: input stall %.0f chip-h, SIG share %.3f, by kind %v", c.name, seed, a.InputStall, a.SIGShare(), a.ByKind)
		}
	}
}

// TestStallChargedToHighPriorityClient: with one high-priority client
// (ads), a low-priority job whose data is pending while an ads job is in
// initial training is queued behind ads' work, so the low-priority
// clients' queued stall is charged to ads, and ads' is never charged to
// a low-priority client.
func TestStallChargedToHighPriorityClient(t *testing.T) {
	var pooled StallByCause
	for seed := uint64(1); seed <= 3; seed++ {
		r, err := Simulate(SimConfig{Seed: seed, HoldAfter: Duration(4 * time.Hour),
			Clients: []string{"ads", "feeds", "search"}, HighPriorityClients: []string{"ads"}})
		if err != nil {
			t.Fatal(err)
		}
		pooled.Add(r.Stall)
	}
	for _, low := range []string{"feeds", "search"} {
		row := pooled.ByClient[low]
		var queuedLow float64
		for _, other := range []string{"feeds", "search"} {
			queuedLow += row[other]
		}
		t.Logf("%s waits: behind ads %.0f chip-h, behind low-priority clients %.0f, nothing ahead %.0f, readers %.0f",
			low, row["ads"], queuedLow, row[AheadNone], row[AheadReader])
		if !(row["ads"] > 0 && row["ads"] > 2*queuedLow) {
			t.Errorf("%s: %.0f chip-h charged to ads, %.0f to low-priority clients", low, row["ads"], queuedLow)
		}
	}
	if row := pooled.ByClient["ads"]; row["feeds"] != 0 || row["search"] != 0 {
		t.Errorf("ads' stall charged to low-priority clients: %v", row)
	}
}

// TestAheadOf: the work ahead of a waiting job is that of the jobs in
// initial training holding their slice at a higher priority, by (client,
// priority), weighed by their slices' chips; with none, that of the
// earlier arrivals at the job's priority; never a caught-up, queued or
// later job's.
func TestAheadOf(t *testing.T) {
	type j struct {
		client           string
		priority, slice  int
		caughtUp, queued bool
	}
	for _, c := range []struct {
		name   string
		others []j // arrive before the waiting job, in order
		later  []j // arrive after it
		prio   int
		want   []stall.Ahead
	}{
		{name: "higher priority first", prio: 0,
			others: []j{{client: "feeds", slice: 256}, {client: "ads", priority: 1, slice: 64}, {client: "ads", priority: 1, slice: 128}},
			want:   []stall.Ahead{{Client: "ads", Priority: 1, Tasks: 192}}},
		{name: "same priority, earlier arrivals", prio: 0,
			others: []j{{client: "feeds", slice: 64}, {client: "search", slice: 128}},
			later:  []j{{client: "ranking", slice: 64}},
			want:   []stall.Ahead{{Client: "feeds", Tasks: 64}, {Client: "search", Tasks: 128}}},
		{name: "caught up and queued jobs are not ahead", prio: 0,
			others: []j{{client: "ads", priority: 1, slice: 4, caughtUp: true}, {client: "feeds", slice: 64}, {client: "search", slice: 128, queued: true}},
			want:   []stall.Ahead{{Client: "feeds", Tasks: 64}}},
		{name: "high priority is not behind low", prio: 1,
			others: []j{{client: "feeds", slice: 64}},
			want:   nil},
	} {
		s := &sim{sched: NewScheduler(1 << 20), jobs: map[string]*simJob{}}
		add := func(x j) *simJob {
			n := len(s.jobs) + 1
			sj := &simJob{name: string(rune('a' + n)), index: n, client: x.client, priority: x.priority, slice: x.slice, caughtUp: x.caughtUp}
			s.jobs[sj.name] = sj
			if !x.queued {
				if _, err := s.sched.Request(sj.name, x.slice, x.priority); err != nil {
					t.Fatal(err)
				}
			}
			return sj
		}
		for _, x := range c.others {
			add(x)
		}
		w := add(j{client: "waiting", priority: c.prio, slice: 64})
		for _, x := range c.later {
			add(x)
		}
		if got := s.aheadOf(w); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: ahead %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestStallDeterministic: one seed gives one stall by cause.
func TestStallDeterministic(t *testing.T) {
	cfg := SimConfig{Seed: 5, Duration: Duration(10 * 24 * time.Hour), HoldAfter: Duration(time.Hour)}
	a, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(cfg)
	if !reflect.DeepEqual(a.Stall, b.Stall) || a.Stall.Charged() == 0 {
		t.Fatalf("two runs of one seed: %+v and %+v", a.Stall, b.Stall)
	}
}
