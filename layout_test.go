package sig_test

// The layout docs/ARCHITECTURE.md draws, checked: layers point down,
// internal/ holds leaves, the reader and the trainer link no Pebble, and
// the trainer's wings import neither its runtime nor each other.
// It reads the import graph from `go list`, as a reviewer would.

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sigdata/sig/"

// layers are the rows of docs/ARCHITECTURE.md's layout, top first: a
// package may import packages of its own row or of rows below it. A
// package is on the row of its longest listed prefix.
var layers = [][]string{
	{"cmd/"},
	{"fleet/run", "e2e"},
	{"sigd", "sigd/ui"},
	{"eviction", "featstats", "workers/memo", "report", "sigd/trainers", "versions"},
	{"matching", "workers", "warehouse/ingest", "warehouse/catalog"},
	{"reader", "trainer"},
	{"warehouse", "warehouse/block", "warehouse/compact", "warehouse/ready", "warehouse/objstore"},
	{"canon", "warehouse/blockref", "matching/insertion", "transform/graphpb", "warehouse/record", "warehouse/gen", "fleet/gen", "fleet/results", "sigd/scale"},
	{"transform"},
	{"internal/", "proto/", "examples"},
}

// harnesses start what they test and are imported by tests only. Their
// own imports point down like any package's: a harness sits on the row of
// its path, above what it starts (evictiontest under eviction, starting a
// sigd, was an arrow up; issue 26).
var harnesses = []string{"sigd/sigdtest", "sigd/evictiontest", "warehouse/block/blocktest"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var ps []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// layer returns the row of a package path (without the module prefix).
func layer(path string) (int, bool) {
	best, row := -1, 0
	for i, r := range layers {
		for _, p := range r {
			if (path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/")) && len(p) > best {
				best, row = len(p), i
			}
		}
	}
	return row, best >= 0
}

func isHarness(path string) bool {
	for _, h := range harnesses {
		if path == h {
			return true
		}
	}
	return false
}

func TestLayersPointDown(t *testing.T) {
	for _, p := range goList(t, "./...") {
		from := strings.TrimPrefix(p.ImportPath, module)
		if strings.HasPrefix(from, "bench/") || !strings.HasPrefix(p.ImportPath, module) || from == "sig" {
			continue
		}
		fl, ok := layer(from)
		if !ok {
			t.Errorf("%s is on no layer of docs/ARCHITECTURE.md's layout", from)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			if isHarness(to) {
				// A harness may build on another (evictiontest starts
				// sigdtest's sigd); nothing else imports one.
				if !isHarness(from) {
					t.Errorf("%s imports the test harness %s", from, to)
				}
				continue
			}
			tl, ok := layer(to)
			if !ok {
				t.Errorf("%s imports %s, which is on no layer", from, to)
				continue
			}
			if tl < fl {
				t.Errorf("%s (layer %d) imports %s (layer %d): layers point down", from, fl, to, tl)
			}
			if strings.HasPrefix(from, "internal/") && !strings.HasPrefix(to, "internal/") && !strings.HasPrefix(to, "proto/") {
				t.Errorf("%s imports %s: internal/ holds leaves (internal/ and proto/ only)", from, to)
			}
		}
	}
}

func TestReaderAndTrainerLinkNoPebble(t *testing.T) {
	for _, p := range goList(t, "-deps", "./cmd/reader", "./cmd/trainer") {
		if strings.Contains(p.ImportPath, "cockroachdb/pebble") {
			t.Errorf("the reader or the trainer links %s", p.ImportPath)
		}
	}
}

// The trainer's wings (trainer/doc.go, "Three wings"): the job runtime,
// package trainer, imports the embedding and accounting wings and wires
// them; a wing never depends on the runtime package, even through another
// package, and never imports the other wing.
var trainerWings = []string{"trainer/embedding", "trainer/accounting"}

func trainerWing(path string) (string, bool) {
	for _, w := range trainerWings {
		if path == w || strings.HasPrefix(path, w+"/") {
			return w, true
		}
	}
	return "", false
}

func TestTrainerWingsImportNoRuntime(t *testing.T) {
	for _, p := range goList(t, "./trainer/...") {
		from := strings.TrimPrefix(p.ImportPath, module)
		wing, ok := trainerWing(from)
		if !ok {
			continue
		}
		for _, d := range p.Deps {
			if d == module+"trainer" {
				t.Errorf("%s depends on the job runtime, package trainer: the runtime wires the wings, not the other way", from)
			}
		}
		for _, imp := range p.Imports {
			if w, ok := trainerWing(strings.TrimPrefix(imp, module)); ok && w != wing {
				t.Errorf("%s (%s) imports %s, of the other wing", from, wing, imp)
			}
		}
	}
}
