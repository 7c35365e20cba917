package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestFleetUsage: wrong arguments are usage errors (exit 2) naming what is
// wrong, before anything starts; a zero is refused, not taken for the
// default.
func TestFleetUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"fleet", "--pipelines", "0"}, "--pipelines 0"},
		{[]string{"fleet", "--rows-per-block", "0"}, "--rows-per-block 0"},
		{[]string{"fleet", "--zipf-s", "0"}, "--zipf-s 0"},
		{[]string{"fleet", "--inputs-max", "500"}, "inputs 6 to 500"},
		{[]string{"fleet", "--host-cores", "-1"}, "--host-cores -1"},
		{[]string{"fleet", "--out", "/no/such/dir/r.json"}, "/no/such/dir"},
	} {
		code, out, errs := runSigctl(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("sigctl %q: exit %d, stderr %q, want 2 naming %q (stdout %q)", c.args, code, errs, c.want, out)
		}
	}
}

// TestFleetCommand runs a tiny fleet through the command: the results file
// reads back in its schema with every series the report plots (the
// object store's traffic and its costs included), the
// summary is printed and written, the constants set by flag are recorded
// as set, and progress goes to stderr an epoch a line.
func TestFleetCommand(t *testing.T) {
	dir := t.TempDir()
	out, sum := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.txt")
	code, stdout, stderr := runSigctl(t, "fleet", "--pipelines", "5", "--clients", "2", "--epochs", "2", "--first", "3",
		"--inputs-min", "2", "--inputs-max", "3", "--history-min", "1", "--history-max", "2", "--rows-per-block", "200",
		"--blocks-per-slot", "1", "--host-cores", "100", "--seed", "7",
		"--sigd-bin", sigdtest.BuildCommand(t, "cmd/sigd"), "--reader-bin", sigdtest.BuildCommand(t, "cmd/reader"),
		"--out", out, "--summary", sum)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fleet.Pipelines != 5 || r.Fleet.Seed != 7 || r.Run.RowsPerBlock != 200 || len(r.Epochs) != 2 ||
		len(r.HitRates) != 2 || len(r.Amortization) != 2 || r.Amortization[1].Pipelines != 5 || len(r.Targets) != 6 || len(r.ReuseSweep) == 0 ||
		r.Store == nil || r.Store.SIGReader.Total() == 0 || len(r.Costs) == 0 {
		t.Errorf("results: fleet %+v, run %+v, %d epochs, %d hit rates, amortization %+v, %d targets, %d sweep points",
			r.Fleet, r.Run, len(r.Epochs), len(r.HitRates), r.Amortization, len(r.Targets), len(r.ReuseSweep))
	}
	if r.Constants.HostCores.Value != 100 || !strings.HasPrefix(r.Constants.HostCores.Source, "set with --host-cores") {
		t.Errorf("host cores %+v", r.Constants.HostCores)
	}
	txt, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if string(txt) != stdout {
		t.Errorf("the summary file differs from what was printed:\n%s\n---\n%s", txt, stdout)
	}
	for _, s := range []string{"Hit rate over time", "Reuse per ready memo block", "Object store (measured at the server", "Requests and CPU priced",
		"Amortization", "Table I analog", "Figure 6 analog", "Targets", "Checks"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("summary has no %q:\n%s", s, stdout)
		}
	}
	if !strings.Contains(stderr, "epoch 1/2: ") || !strings.Contains(stderr, "epoch 2/2: 5 pipelines submitted") {
		t.Errorf("progress:\n%s", stderr)
	}
}
