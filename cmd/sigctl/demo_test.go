package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/sigdata/sig/trainer"
	"github.com/sigdata/sig/trainer/goodput"
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
