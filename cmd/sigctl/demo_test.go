package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/trainer"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/stall"
)

// TestPrintTrainingScopes: the demo's training summary names the scope of
// each goodput figure. A job that asked for 4 chips, then 1 once caught up,
// on an emulated fleet of 4 has SG 1 of its own and 0.25 of the fleet's
// capacity; the web UI shows the job's 100 %, so the summary's SG must be
// the job's too, and the fleet's is labelled as such (the demo printed the
// fleet's 0.25 as "SG").
func TestPrintTrainingScopes(t *testing.T) {
	rep := trainer.Report{Job: "ctr_small", Exit: "done", Goodput: goodput.Report{
		Fleet: goodput.Summary{SG: 0.25, RG: 0.99, PG: 0.05, MPG: 0.25 * 0.99 * 0.05},
		Jobs: []goodput.JobReport{
			{Job: "other", Total: goodput.Summary{SG: 0.5}},
			{Job: "ctr_small", Total: goodput.Summary{SG: 1, RG: 0.99, PG: 0.05, MPG: 0.99 * 0.05}},
		},
	}}
	var b bytes.Buffer
	printTraining(&b, []trainedJob{{rep, "trainer-ctr_small.txt"}})
	lines := strings.Split(b.String(), "\n")
	cols := regexp.MustCompile(`\s{2,}`)
	head, row := cols.Split(strings.TrimSpace(lines[0]), -1), cols.Split(strings.TrimSpace(lines[1]), -1)
	if len(head) != len(row) {
		t.Fatalf("header %q, row %q", head, row)
	}
	got := map[string]string{}
	for i, h := range head {
		got[h] = row[i]
	}
	for col, want := range map[string]string{"SG (JOB)": "1.00", "RG": "0.99", "PG": "0.05", "MPG (JOB)": "0.05", "SG (FLEET)": "0.25", "MPG (FLEET)": "0.01"} {
		if got[col] != want {
			t.Errorf("column %s: %q, want %s\n%s", col, got[col], want, b.String())
		}
	}
	if !strings.Contains(b.String(), "SG (job) is") || !strings.Contains(b.String(), "SG (fleet) divides") {
		t.Errorf("the summary does not say what the scopes are:\n%s", b.String())
	}
}

// TestPrintTrainingPGWhy: the summary says in one line why a job's PG is
// 0.05: its steps' mean ideal (TensorCore) time of 3 ns of 60.5 ns device
// time, the SparseCore's lookups taking 57.5 ns of it.
func TestPrintTrainingPGWhy(t *testing.T) {
	rep := trainer.Report{Job: "ctr_small", Exit: "done", Phases: []trainer.PhaseReport{
		{Phase: "initial", Steps: 3, TensorCoreNSPerStep: 2, SparseCoreNSPerStep: 50, DeviceNSPerStep: 52},
		{Phase: "caught-up", Steps: 1, TensorCoreNSPerStep: 6, SparseCoreNSPerStep: 80, DeviceNSPerStep: 86},
	}, Goodput: goodput.Report{Jobs: []goodput.JobReport{{Job: "ctr_small", Total: goodput.Summary{SG: 1, RG: 1, PG: 0.049, MPG: 0.049}}}}}
	var b bytes.Buffer
	printTraining(&b, []trainedJob{{rep, "r.txt"}})
	want := "ctr_small: PG 0.049 = 3 ns ideal (the model FLOPs at TensorCore peak) / 60.5 ns device time per step: " +
		"the SparseCore's embedding lookups take 57.5 ns of it, which the compute roofline (MPG paper §4) does not count as ideal, " +
		"so this lookup-bound model's PG is low by design.\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("summary:\n%s\nwant it to end with\n%s", b.String(), want)
	}
}

// TestPrintTrainingStall: the demo prints, for the job that stalled most,
// its input stall by cause (issue 30).
func TestPrintTrainingStall(t *testing.T) {
	led := stall.Ledger{Stall: 3 * time.Second, Lines: []stall.Line{
		{Cause: stall.Cause{Kind: stall.Queued, Component: "unigrams(lower(col(\"query\")))", Block: "b3", Client: "ranking", Priority: 900}, Charged: 2 * time.Second, Ahead: 340, AheadOf: 340},
		{Cause: stall.Cause{Kind: stall.ReaderFetch, Block: "b4"}, Charged: time.Second},
	}}
	jobs := []trainedJob{{trainer.Report{Job: "calm"}, "a.txt"}, {trainer.Report{Job: "waiting", Stall: led}, "b.txt"}}
	var b bytes.Buffer
	printTraining(&b, jobs)
	for _, want := range []string{
		"waiting: input stall 3s by cause (sum 3s):",
		`  2s waiting on unigrams(lower(col("query"))), block b3, queued behind 340 tasks (340 of client ranking at priority 900)`,
		"  1s waiting on a reader (fetch), block b4",
		"  by kind: queued 2s, reader_fetch 1s",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
