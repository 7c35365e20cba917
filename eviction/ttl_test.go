package eviction_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
)

// TestTTLEviction: last-requested eviction on sigd's clock. Components not
// requested within the TTL lose their memo entries and objects, those
// requested recently keep them; the evicted pipelines' read solutions turn
// pending and are recomputed on the next read; and sigd's own loop runs the
// rounds every interval. The decisions alone are
// TestRoundEvictsIdleComponents's, on the Evictor without sigd; this adds
// sigd's wiring: its clock, its loop, its workers and the audit over gRPC.
func TestTTLEviction(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	const ttl, interval = time.Hour, 6 * time.Hour
	e := newEnv(t, evictiontest.Config{Clock: clk, EvictTTL: ttl, EvictInterval: interval})
	e.Pipelines()
	ctrSol, cvrSol, expSol := e.Solution("ctr", "ctr-small"), e.Solution("cvr", evictiontest.XSSPipeline), e.Solution("explore", "explore")
	ctr, cvr, exp := evictiontest.Components(ctrSol), evictiontest.Components(cvrSol), evictiontest.Components(expSol)
	ev := e.Srv.Evictor()

	// Within the TTL nothing goes.
	clk.Advance(30 * time.Minute)
	e.Solution("ctr", "ctr-small") // ctr's components are requested again
	d, err := ev.Round(e.Ctx)
	if err != nil || len(d) != 0 {
		t.Fatalf("round within the TTL: %v, %v", d, err)
	}
	// 75 minutes after the submits, 45 after ctr's last read.
	clk.Advance(45 * time.Minute)
	d, err = ev.Round(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range d {
		if x.Reason != "ttl" {
			t.Errorf("decision %v, want reason ttl", x)
		}
		got = append(got, x.Component.String())
	}
	slices.Sort(got)
	if want := keyStrings(append(cvr, exp...)...); !slices.Equal(got, want) {
		t.Errorf("evicted %v, want cvr's and explore's components %v", got, want)
	}
	for _, k := range append(cvr, exp...) {
		e.CheckEvicted(k)
	}
	for _, k := range ctr {
		e.CheckMemoized(k)
	}
	a, err := e.SIG(evictiontest.Operator).ListAudit(e.Ctx, &sigv1.ListAuditRequest{})
	if err != nil || len(a.Entries) != 1 || a.Entries[0].Who != "eviction-policy" || !strings.Contains(a.Entries[0].Why, "3 by ttl") ||
		!a.Entries[0].When.AsTime().Equal(clk.Now()) {
		t.Errorf("audit after the round: %v, %v", a, err)
	}
	if d, err := ev.Round(e.Ctx); err != nil || len(d) != 0 {
		t.Errorf("a second round at once evicted %v (%v)", d, err)
	}

	// The next read re-creates the entries pending; workers recompute them.
	sol := e.Solution("cvr", evictiontest.XSSPipeline)
	if sol.Complete || int(sol.BlocksPending) != 2*len(e.Blocks) {
		t.Errorf("cvr after TTL eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	e.WaitComplete("cvr", evictiontest.XSSPipeline)
	e.WaitComplete("explore", "explore")
	for _, k := range append(cvr, exp...) {
		e.CheckMemoized(k)
	}

	// sigd's loop: once the interval has passed, a round runs by itself;
	// by then every component is idle.
	clk.Advance(interval)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, k := range append(append(ctr, cvr...), exp...) {
			n += len(e.Memos(k)) + len(e.Objects(k))
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sigd's TTL loop did not evict the idle components (%d entries and objects left)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ev.Evicted() != int64(3*len(e.Blocks)+6*len(e.Blocks)) {
		t.Errorf("evicted %d blocks in all, want %d", ev.Evicted(), 9*len(e.Blocks))
	}
	e.WaitComplete("ctr", "ctr-small")
	for _, k := range ctr {
		e.CheckMemoized(k)
	}
}
