package eviction_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// TestTTLEviction: last-requested eviction on sigd's clock. Components not
// requested within the TTL lose their memo entries and objects, those
// requested recently keep them; the evicted pipelines' read solutions turn
// pending and are recomputed on the next read; and sigd's own loop runs the
// rounds every interval.
func TestTTLEviction(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	const ttl, interval = time.Hour, 6 * time.Hour
	e := newEnv(t, envConfig{Clock: clk, EvictTTL: ttl, EvictInterval: interval})
	e.pipelines()
	ctrSol, cvrSol, expSol := e.solution("ctr", "ctr-small"), e.solution("cvr", xssPipeline), e.solution("explore", "explore")
	ctr, cvr, exp := components(ctrSol), components(cvrSol), components(expSol)
	ev := e.srv.Evictor()

	// Within the TTL nothing goes.
	clk.Advance(30 * time.Minute)
	e.solution("ctr", "ctr-small") // ctr's components are requested again
	d, err := ev.Round(e.ctx)
	if err != nil || len(d) != 0 {
		t.Fatalf("round within the TTL: %v, %v", d, err)
	}
	// 75 minutes after the submits, 45 after ctr's last read.
	clk.Advance(45 * time.Minute)
	d, err = ev.Round(e.ctx)
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
		e.checkEvicted(k)
	}
	for _, k := range ctr {
		e.checkMemoized(k)
	}
	a, err := e.sig(operator).ListAudit(e.ctx, &sigv1.ListAuditRequest{})
	if err != nil || len(a.Entries) != 1 || a.Entries[0].Who != "eviction-policy" || !strings.Contains(a.Entries[0].Why, "3 by ttl") ||
		!a.Entries[0].When.AsTime().Equal(clk.Now()) {
		t.Errorf("audit after the round: %v, %v", a, err)
	}
	if d, err := ev.Round(e.ctx); err != nil || len(d) != 0 {
		t.Errorf("a second round at once evicted %v (%v)", d, err)
	}

	// The next read re-creates the entries pending; workers recompute them.
	sol := e.solution("cvr", xssPipeline)
	if sol.Complete || int(sol.BlocksPending) != 2*len(e.blocks) {
		t.Errorf("cvr after TTL eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	e.waitComplete("cvr", xssPipeline)
	e.waitComplete("explore", "explore")
	for _, k := range append(cvr, exp...) {
		e.checkMemoized(k)
	}

	// sigd's loop: once the interval has passed, a round runs by itself;
	// by then every component is idle.
	clk.Advance(interval)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, k := range append(append(ctr, cvr...), exp...) {
			n += len(e.memos(k)) + len(e.objects(k))
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sigd's TTL loop did not evict the idle components (%d entries and objects left)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ev.Evicted() != int64(3*len(e.blocks)+6*len(e.blocks)) {
		t.Errorf("evicted %d blocks in all, want %d", ev.Evicted(), 9*len(e.blocks))
	}
	e.waitComplete("ctr", "ctr-small")
	for _, k := range ctr {
		e.checkMemoized(k)
	}
}

// TestBudgetEvictionRound: with a storage budget, a round evicts the least
// recently requested components until the rest fits.
func TestBudgetEvictionRound(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, envConfig{Clock: clk, Blocks: 2, Rows: 200})
	e.submit("explore", "explore", exploreDSL)
	e.waitComplete("explore", "explore")
	clk.Advance(time.Minute)
	e.submit("cvr", xssPipeline, cvrDSL)
	e.waitComplete("cvr", xssPipeline)
	exp, cvr := components(e.solution("explore", "explore")), components(e.solution("cvr", xssPipeline))
	var cvrBytes int64
	for _, k := range cvr {
		info, err := e.srv.Frontend().Info(k)
		if err != nil {
			t.Fatal(err)
		}
		cvrBytes += info.Bytes
	}
	ev := &eviction.Evictor{Frontend: e.srv.Frontend(), Store: e.srv.Store(), Clock: clk,
		Policy: eviction.Policy{BudgetBytes: cvrBytes}}
	d, err := ev.Round(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || d[0].Component != exp[0] || d[0].Reason != "budget" {
		t.Errorf("budget round: %v, want explore's component", d)
	}
	e.checkEvicted(exp[0])
	for _, k := range cvr {
		e.checkMemoized(k)
	}
}
