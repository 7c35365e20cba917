package fleet

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/figure"
)

// TestCommitClosedForm: the simulation decides a preempted epoch by one
// draw of the notice against the drain and save (or a measured exit time),
// so its committed fraction is the closed form up to sampling — the
// figure is the constants', not the fleet's. Checked within four standard
// errors, with the default drain and save and with measured exit times.
func TestCommitClosedForm(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  SimConfig
	}{
		{"drain+save", SimConfig{}},
		{"short notice", SimConfig{NoticeMean: Duration(4 * time.Minute)}},
		{"measured exits", SimConfig{DrainSaveTimes: []Duration{Duration(3 * time.Minute), Duration(9 * time.Minute), Duration(20 * time.Minute)}}},
	} {
		var committed, preempted int
		for seed := uint64(1); seed <= 4; seed++ {
			cfg := c.cfg
			cfg.Seed, cfg.MaintenanceMTBF = seed, Duration(12*time.Hour)
			r, err := Simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			committed, preempted = committed+r.PreemptedCommitted, preempted+r.PreemptedEpochs
		}
		p := c.cfg.CommitClosedForm()
		got := float64(committed) / float64(preempted)
		se := math.Sqrt(p * (1 - p) / float64(preempted))
		t.Logf("%s: simulated %.3f of %d, closed form %.3f (se %.3f)", c.name, got, preempted, p, se)
		if math.Abs(got-p) > 4*se {
			t.Errorf("%s: simulated %.3f of %d preempted epochs, closed form %.3f", c.name, got, preempted, p)
		}
	}
	// The closed form by hand: notice 12m, drain 5m, save 2m.
	if got, want := (SimConfig{}).CommitClosedForm(), math.Exp(-2.0/12)*12/17; math.Abs(got-want) > 1e-12 {
		t.Errorf("default closed form %v, want %v", got, want)
	}
}

// TestStudyFigures: every figure of the fleet is labelled (Check), its
// constants carry sources, its sweep runs through the configured value
// (where the sweep's figure is the figure's own), the deciding constants
// move the figures the way the model says, and a measurement replaces its
// constant's source and makes fleet PG a measured figure.
func TestStudyFigures(t *testing.T) {
	cfg := SimConfig{Seed: 1, Duration: Duration(7 * 24 * time.Hour)}
	st, err := RunStudy(cfg, StudyOptions{Seeds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FigSG, FigRG, FigPG, FigMPG, FigQueuedPerTraining, FigOnHoldPerTraining, FigCommitted, FigCommittedClosed} {
		f, ok := st.Figures[name]
		if !ok {
			t.Fatalf("no figure %s", name)
		}
		if f.Kind != figure.Modelled {
			t.Errorf("%s: kind %s with every constant at its default", name, f.Kind)
		}
		for _, p := range f.Sweep {
			if p.At == f.Constants[p.Constant].Value && p.Value != f.Value {
				t.Errorf("%s: sweep of %s at the configured %g gives %g, the figure %g", name, p.Constant, p.At, p.Value, f.Value)
			}
		}
	}
	if s := st.Figures[FigOnHoldPerTraining].Constants["human_response"].Source; !strings.Contains(s, "guess") {
		t.Errorf("human_response source %q", s)
	}
	ends := func(fig, constant string) (lo, hi float64) {
		pts := st.Figures[fig].SweepOf(constant)
		if len(pts) < 3 {
			t.Fatalf("%s: sweep of %s has %d points", fig, constant, len(pts))
		}
		return pts[0].Value, pts[len(pts)-1].Value
	}
	if lo, hi := ends(FigOnHoldPerTraining, "human_response"); !(lo < hi) {
		t.Errorf("on hold per training: %.2f with the shortest human response, %.2f with the longest", lo, hi)
	}
	if lo, hi := ends(FigCommittedClosed, "notice_mean"); !(lo < 0.3 && hi > 0.9) {
		t.Errorf("closed form from the shortest to the longest notice: %.2f to %.2f", lo, hi)
	}
	if lo, hi := ends(FigMPG, "program_goodput"); !(lo < hi) {
		t.Errorf("MPG from the lowest to the highest PG: %.3f to %.3f", lo, hi)
	}

	m := Measured{ProgramGoodput: 0.05, DrainSaveTimes: []Duration{Duration(time.Second), Duration(2 * time.Second)},
		How: map[string]string{"program_goodput": "ideal over productive time of 3 real jobs"}}
	mc := SimConfig{Seed: 1, Duration: Duration(3 * 24 * time.Hour)}
	src := m.Apply(&mc)
	ms, err := RunStudy(mc, StudyOptions{Seeds: 1, Sources: src})
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	pg := ms.Figures[FigPG]
	if pg.Kind != figure.Measured || math.Abs(pg.Value-0.05) > 1e-3 || !strings.Contains(pg.How, "3 real jobs") {
		t.Errorf("fleet PG with a measured program goodput: %+v", pg)
	}
	c := ms.Figures[FigCommitted]
	if _, ok := c.Constants["drain_save_median"]; !ok || c.Constants["drain_save_median"].Value != 2 {
		t.Errorf("committed fraction with measured exit times: constants %+v", c.Constants)
	}
	if _, ok := c.Constants["drain_mean"]; ok {
		t.Errorf("drain_mean listed although measured exit times replaced it: %+v", c.Constants)
	}
}

// TestNoticeForCommitted finds the notice at which the closed form gives a
// fraction: the paper's 61% with the default drain and save, and with
// measured drain-and-save times of about a second.
func TestNoticeForCommitted(t *testing.T) {
	for _, c := range []SimConfig{{}, {DrainSaveTimes: []Duration{Duration(500 * time.Millisecond), Duration(900 * time.Millisecond)}}} {
		n, ok := NoticeForCommitted(c, 0.61)
		if !ok {
			t.Fatalf("%+v: no notice", c)
		}
		c.NoticeMean = Duration(n)
		if got := c.CommitClosedForm(); math.Abs(got-0.61) > 1e-3 {
			t.Errorf("notice %v gives %.4f, want 0.61", n, got)
		}
	}
	if _, ok := NoticeForCommitted(SimConfig{}, 1); ok {
		t.Error("a fraction of 1 reached")
	}
}
