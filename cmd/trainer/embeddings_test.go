package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigdata/sig/internal/figure"
)

func TestEmbeddingsReportCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "emb.json")
	var out, errb bytes.Buffer
	args := []string{"embeddings-report", "--models", "C", "--chips", "2", "--batch-per-chip", "16", "--elements", "1048576",
		"--ps-elements", "262144", "--steps", "1", "--profile-steps", "50", "--ps-steps", "1", "--quiet", "--json", path}
	if code := runMain(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "Figure 7") || !strings.Contains(out.String(), "coalesced") {
		t.Errorf("text report:\n%s", out.String())
	}
	if errb.Len() != 0 {
		t.Errorf("--quiet wrote to stderr: %s", errb.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Models []struct {
			Model   string
			Configs []struct{ Config string }
		}
		Figures figure.Set
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Models) != 1 || rep.Models[0].Model != "C" || len(rep.Models[0].Configs) != 4 {
		t.Errorf("JSON report: %s", b)
	}
	if err := rep.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	if f := rep.Figures["geomean_speedup"]; f.Kind != figure.Modelled || len(f.SweepOf("shard_overhead_ns")) != 4 {
		t.Errorf("geomean speedup: %+v", f)
	}
	for _, bad := range [][]string{
		{"embeddings-report", "--steps", "0"},
		{"embeddings-report", "--bogus"},
		{"embeddings-report", "--shard-overheads", "0,x"},
		{"embeddings-report", "--contentions", "-1"},
	} {
		out.Reset()
		errb.Reset()
		if code := runMain(bad, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	errb.Reset()
	if code := runMain([]string{"embeddings-report", "--models", "Q", "--json", ""}, &out, &errb); code == 0 || !strings.Contains(errb.String(), `"Q"`) {
		t.Errorf("unknown model: exit %d, %s", code, errb.String())
	}
}
