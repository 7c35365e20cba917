package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/report"
	"github.com/sigdata/sig/trainer/accounting/fleet"
)

func TestJobCommandsRejectBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"controller", "--client", "c", "--pipeline", "p"},
		{"controller", "--client", "c", "--pipeline", "p", "--range", "yesterday", "--s3-endpoint", "x:1"},
		{"controller", "--client", "c", "--pipeline", "p", "--range", "0:10", "--s3-endpoint", "x:1", "--mode", "warp"},
		{"controller", "--client", "c", "--pipeline", "p", "--range", "0:10", "--s3-endpoint", "x:1", "--ps-servers", "x"},
		{"host"},
		{"fleet", "--bogus"},
	} {
		var out, errb bytes.Buffer
		if code := runMain(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, code, errb.String())
		}
	}
}

// TestParseRange: a job's --range, read as the controller's event range
// (TO may be empty: the job follows the stream).
func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in       string
		from, to int64
	}{
		{"100:200", 100, 200},
		{"100:", 100, 0},
		{"2026-01-01T00:00:00Z:2026-01-01T01:00:00Z", 1767225600000000, 1767229200000000},
	} {
		from, to, err := parseRange(t, c.in)
		if err != nil || from != c.from || to != c.to {
			t.Errorf("%q: %d %d %v", c.in, from, to, err)
		}
	}
}

// parseRange parses a controller's flags with --range s and returns the
// event range of its config.
func parseRange(t *testing.T, s string) (from, to int64, err error) {
	t.Helper()
	fs := commands.NewFlags("controller", io.Discard)
	f := addJobFlags(fs)
	if err := cli.ParseEnv(fs, []string{"--client", "c", "--pipeline", "p", "--s3-endpoint", "x:1", "--range", s}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(slog.New(slog.DiscardHandler))
	return cfg.From, cfg.To, err
}

// TestFleetJSON: the fleet's JSON report carries each seed's run and its
// figures, every one labelled (figure.Set.Check): modelled, its constants
// with sources, its sweeps; the text says so beside each figure and shows
// the committed fraction next to its closed form.
func TestFleetJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain([]string{"fleet", "--days", "3", "--seeds", "2", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Config  map[string]any    `json:"config"`
		Runs    []json.RawMessage `json:"runs"`
		Figures figure.Set        `json:"figures"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != 2 || got.Config == nil {
		t.Fatalf("runs %d, config %v", len(got.Runs), got.Config)
	}
	var run struct {
		JobGoodput []struct {
			Job string  `json:"job"`
			MPG float64 `json:"mpg"`
		} `json:"job_goodput"`
	}
	if err := json.Unmarshal(got.Runs[0], &run); err != nil || len(run.JobGoodput) == 0 || run.JobGoodput[0].Job == "" {
		t.Errorf("a run's job_goodput: %v %+v", err, run)
	}
	if err := got.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	if f := got.Figures[fleet.FigSIGStallShare]; f.Value != 0 || len(f.SweepOf("hold_after")) == 0 {
		t.Errorf("%s with hold_after 0: %+v", fleet.FigSIGStallShare, f)
	}
	for _, name := range []string{fleet.FigOnHoldPerTraining, fleet.FigCommitted, fleet.FigCommittedClosed, fleet.FigMPG} {
		if f := got.Figures[name]; f.Kind != figure.Modelled || len(f.Sweep) == 0 {
			t.Errorf("%s: %+v", name, f)
		}
	}
	out.Reset()
	if code := runMain([]string{"fleet", "--days", "3", "--seeds", "1"}, &out, &errb); code != 0 {
		t.Fatalf("text: exit %d\n%s", code, out.String())
	}
	for _, s := range []string{"Table II", "on hold per training", "MODELLED; human_response 120 h (guess",
		"sweep human_response (h): 24:", "closed form", "sweep notice_mean (s), simulated / closed form:", "program_goodput 0.55",
		"input stall by cause (stall ledger", "reader_fetch", "sweep hold_after (h): 0: 0.000", "waiting \\ ahead"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, out.String())
		}
	}
}

// TestFleetReportInBenchReport: the file `trainer fleet --report` writes
// is what package report reads as bench/fleet.json: Table II, the
// committed preempted epochs and the MPG per job are drawn from it.
func TestFleetReportInBenchReport(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := runMain([]string{"fleet", "--days", "2", "--seeds", "2", "--report", filepath.Join(dir, report.TrainerFleet)}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	r, err := report.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	plots := map[string]bool{}
	for _, p := range r.Plots() {
		plots[p.Name] = true
	}
	for _, name := range []string{"training-fleet-table-ii", "training-fleet-committed", "training-fleet-job-mpg", "training-fleet-fleet-goodput"} {
		if !plots[name] {
			t.Errorf("the report of trainer fleet's file has no plot %s", name)
		}
	}
}

// TestFleetMeasured: --measured replaces constants with this system's
// measurements: fleet PG becomes a measured figure, the preemption model
// takes the measured exit times, and the sources say how.
func TestFleetMeasured(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "preemption.json")
	if err := os.WriteFile(path, []byte(`{"figures": {}, "measured": {"program_goodput": 0.05, "input_stall": 0.02,
		"drain_save_times": ["0.5s", "0.7s", "0.9s"], "how": {"program_goodput": "ideal over productive time of 4 real jobs"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runMain([]string{"fleet", "--days", "3", "--seeds", "1", "--measured", path, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Figures figure.Set `json:"figures"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if err := got.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	pg := got.Figures[fleet.FigPG]
	if pg.Kind != figure.Measured || pg.Value > 0.06 || !strings.Contains(pg.How, "4 real jobs") {
		t.Errorf("fleet PG: %+v", pg)
	}
	c := got.Figures[fleet.FigCommitted].Constants
	if e, ok := c["drain_save_median"]; !ok || e.Value != 0.7 || !strings.HasPrefix(e.Source, figure.MeasuredPrefix) {
		t.Errorf("preemption constants: %+v", c)
	}
	if s := got.Figures[fleet.FigRG].Constants["input_stall"]; s.Value != 0.02 || !strings.HasPrefix(s.Source, figure.MeasuredPrefix) {
		t.Errorf("input stall: %+v", s)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"figures": {}}`), 0o644)
	errb.Reset()
	if code := runMain([]string{"fleet", "--days", "1", "--measured", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `no "measured"`) {
		t.Errorf("file without measurements: exit %d, %s", code, errb.String())
	}
}

// TestFiguresCommand prints a report's figures with their kind, constants
// and sweeps, and refuses a report whose figures are not labelled.
func TestFiguresCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"figures": {"committed": {"value": 0.55, "unit": "fraction", "kind": "modelled", "how": "P(t <= notice)",
		"paper": {"value": 0.61, "where": "Ads paper VII.G"},
		"constants": {"notice_max": {"value": 1.5, "unit": "s", "source": "guess"}},
		"sweep": [{"constant": "notice_max", "at": 1, "value": 0.32}, {"constant": "notice_max", "at": 1.5, "value": 0.55}]}}}`), 0o644)
	var out, errb bytes.Buffer
	if code := runMain([]string{"figures", good}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, s := range []string{"committed = 0.55 fraction: MODELLED", "paper: 0.61 (Ads paper VII.G)", "constant notice_max = 1.5 s: guess",
		"sweep notice_max (s): 1: 0.32 1.5: 0.55"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"figures": {"x": {"value": 1, "kind": "modelled", "how": "a constant"}}}`), 0o644)
	errb.Reset()
	if code := runMain([]string{"figures", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "figure x: modelled without constants") {
		t.Errorf("unlabelled figure: exit %d, %s", code, errb.String())
	}
	if code := runMain([]string{"figures"}, &out, &errb); code != 2 {
		t.Errorf("no file: exit %d", code)
	}
}

// TestFleetStallJSON: with hold_after set, the JSON report carries the
// fleet's input stall by cause kind and by (waiting client, client
// ahead), seeds pooled, labelled modelled with its constants; the causes
// sum to the input stall the goodput accounting measured.
func TestFleetStallJSON(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(cfg, []byte(`{"hold_after": "2h", "clients": ["ads", "feeds"], "high_priority_clients": ["ads"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runMain([]string{"fleet", "--config", cfg, "--days", "7", "--seeds", "2", "--sweeps=false", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Stall struct {
			Kind       figure.Kind                   `json:"kind"`
			Figure     string                        `json:"figure"`
			Constants  map[string]figure.Constant    `json:"constants"`
			InputStall float64                       `json:"input_stall_chip_hours"`
			ByKind     map[string]float64            `json:"by_kind_chip_hours"`
			ByClient   map[string]map[string]float64 `json:"by_client_chip_hours"`
			Waited     map[string]map[string]float64 `json:"waited_job_hours"`
		} `json:"stall"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	st := got.Stall
	var sum float64
	for _, v := range st.ByKind {
		sum += v
	}
	if st.Kind != figure.Modelled || st.Figure != fleet.FigSIGStallShare || st.Constants["hold_after"].Value != 2 ||
		st.InputStall <= 0 || math.Abs(sum-st.InputStall) > 1e-6*st.InputStall || st.ByKind["queued"] <= 0 ||
		st.ByClient["feeds"]["ads"] <= 0 || len(st.Waited) == 0 {
		t.Errorf("stall: %+v (sum of kinds %.3f)", st, sum)
	}
}
