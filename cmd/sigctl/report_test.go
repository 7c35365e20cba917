package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFixtures copies the report package's fixtures into a new directory.
func copyFixtures(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "all", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReportCommand: sigctl report writes DIR/REPORT.md and its plots from
// the bench files there, says which inputs were not run, and a malformed
// input is an error naming the file and field that writes nothing.
func TestReportCommand(t *testing.T) {
	dir := copyFixtures(t, "fleet-run.json", "scale.json")
	var out, errb bytes.Buffer
	if code := runMain([]string{"report", "--bench", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"![Hit rate over time](report/fleet-run-hit-rate.svg)", "**measured** · mirrors paper IV.A",
		"**modelled** · mirrors paper Table I", "Not run: " + dir + "/fleet.json is not there.", "![SubmitGraph latency against cache size](report/scale-submit.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "report", "fleet-run-hit-rate.svg")); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "from: fleet-run.json, scale.json") || !strings.Contains(out.String(), "not run (the report says which command writes each): fleet-full.json, fleet-full-default.json, fleet.json") {
		t.Errorf("stdout: %s", out.String())
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "scale.json"), []byte(`{"schema": "sig.scale/v1", "points": [{"components": "many"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := runMain([]string{"report", "--bench", bad}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), filepath.Join(bad, "scale.json")+": field points.components: a JSON string where int was expected") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(bad, "REPORT.md")); !os.IsNotExist(err) {
		t.Errorf("a malformed input wrote a report: %v", err)
	}
	if code := runMain([]string{"report", "extra"}, &out, &errb); code != 2 {
		t.Errorf("a positional argument: exit %d", code)
	}
}
