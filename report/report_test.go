package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/sigdata/sig/internal/figure"
)

// TestMarkdown pins the whole report of the fixtures in testdata/all
// (testdata/report.txt; `go test ./report -run TestMarkdown -rewrite` after
// a deliberate change, then review the diff): a fleet run's results
// (fleet/results), the control plane's scale curve, the training fleet
// simulation, the preemption benchmark and the embeddings report.
func TestMarkdown(t *testing.T) {
	datadriven.RunTest(t, "testdata/report.txt", func(t *testing.T, td *datadriven.TestData) string {
		var dir string
		td.ScanArgs(t, "dir", &dir)
		r, err := Build(filepath.Join("testdata", dir))
		if err != nil {
			return "error: " + err.Error()
		}
		// The directory as a user would give it, not the test's path.
		r.Dir = "bench"
		return r.Markdown("report")
	})
}

// TestEveryPlotLabelled: every plot of the fixtures' report says whether it
// is measured or modelled and what it mirrors or how it was made; its SVG
// is well-formed; every input section of the fixtures has plots.
func TestEveryPlotLabelled(t *testing.T) {
	r, err := Build("testdata/all")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range r.Sections {
		var plots int
		for _, it := range s.Items {
			if it.Plot != nil {
				plots++
			}
		}
		if s.Missing != "" || plots == 0 {
			t.Errorf("section %s: missing %q, %d plots", s.ID, s.Missing, plots)
		}
	}
	for _, p := range r.Plots() {
		if p.Kind != figure.Measured && p.Kind != figure.Modelled {
			t.Errorf("plot %s: kind %q", p.Name, p.Kind)
		}
		if p.Caption == "" || p.Title == "" {
			t.Errorf("plot %s has no title or caption", p.Name)
		}
		if names[p.Name] {
			t.Errorf("two plots named %s", p.Name)
		}
		names[p.Name] = true
		if err := xml.Unmarshal([]byte(p.SVG), new(struct{})); err != nil {
			t.Errorf("plot %s: %v", p.Name, err)
		}
		if p.Kind == figure.Modelled && !strings.Contains(p.Caption, "(") {
			t.Errorf("modelled plot %s lists no constants with sources: %s", p.Name, p.Caption)
		}
	}
	// Table I and Figure 6 combine measured CPU with modelled constants:
	// modelled; the hit rate is measured; so is the store's traffic and
	// its split, and its price is modelled.
	for name, want := range map[string]figure.Kind{"fleet-run-hit-rate": figure.Measured, "fleet-run-table-i": figure.Modelled,
		"fleet-run-figure-6": figure.Modelled, "scale-submit": figure.Measured, "embeddings-figure-7": figure.Modelled,
		"embeddings-coalescing": figure.Measured, "training-fleet-table-ii": figure.Modelled, "preemption-times": figure.Measured,
		"fleet-full-store": figure.Measured, "fleet-full-costs": figure.Modelled} {
		var got figure.Kind
		for _, p := range r.Plots() {
			if p.Name == name {
				got = p.Kind
			}
		}
		if got != want {
			t.Errorf("plot %s: kind %q, want %q", name, got, want)
		}
	}
}

// TestMissingInputs: a directory without bench files gives a report whose
// every section says it was not run and which command writes its input.
func TestMissingInputs(t *testing.T) {
	dir := t.TempDir()
	r, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sections) != len(Inputs) || len(r.Plots()) != 0 {
		t.Fatalf("%d sections, %d plots", len(r.Sections), len(r.Plots()))
	}
	md := r.Markdown("report")
	for _, name := range Inputs {
		if !strings.Contains(md, "Not run: "+dir+"/"+name+" is not there. "+Makes(name)) {
			t.Errorf("the report does not say that %s was not run, and how to make it:\n%s", name, md)
		}
	}
	if HasInputs(dir) {
		t.Error("an empty directory has inputs")
	}
}

// TestMalformedInputs: a malformed input is an error that names the file
// and the field, not a report and not a panic.
func TestMalformedInputs(t *testing.T) {
	for _, c := range []struct {
		name, file, content, want string
	}{
		{"not JSON", FleetRun, `{"schema": "sig.fleet.results/v1", "epochs": [`, "fleet-run.json: not JSON"},
		{"fleet schema", FleetFull, `{"schema": "sig.fleet.results/v2", "epochs": [{}]}`, `fleet-full.json: field schema: "sig.fleet.results/v2", this build reads "sig.fleet.results/v1"`},
		{"fleet no epochs", FleetRun, `{"schema": "sig.fleet.results/v1"}`, "fleet-run.json: field epochs: missing or empty"},
		{"fleet type", FleetRun, `{"schema": "sig.fleet.results/v1", "epochs": [{"epoch": "one"}]}`, "fleet-run.json: field epochs.epoch: a JSON string where int was expected"},
		{"scale schema", Scale, `{"schema": "sig.scale/v0", "points": [{}]}`, `scale.json: field schema: "sig.scale/v0"`},
		{"scale point", Scale, `{"schema": "sig.scale/v1", "points": [{"components": 1, "submit_p50_ms": 1, "submit_p99_ms": 2}, {"submit_p50_ms": 1}]}`, "scale.json: field points[1].components: missing"},
		{"scale type", Scale, `{"schema": "sig.scale/v1", "points": [{"components": 1, "submit_p50_ms": "fast"}]}`, "scale.json: field points.submit_p50_ms: a JSON string where float64 was expected"},
		{"fleet figures", TrainerFleet, `{"runs": [{"seed": 1}], "figures": {"fleet_mpg": {"value": 0.3, "kind": "modelled", "how": "sim"}}}`, "fleet.json: field figures.fleet_mpg: modelled without constants"},
		{"fleet runs", TrainerFleet, `{"figures": {}}`, "fleet.json: field runs: missing or empty"},
		{"preemption kind", Preemption, `{"figures": {"x": {"value": 1, "kind": "estimated", "how": "h"}}}`, `preemption.json: field figures.x: kind "estimated"`},
		{"embeddings figures", Embeddings, `{"models": []}`, "embeddings.json: field figures: missing or empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Build(dir)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, c.want)) {
				t.Fatalf("got %v (report %v), want an error containing %q", err, r != nil, filepath.Join(dir, c.want))
			}
		})
	}
}

// TestWriteFiles: the Markdown's images are the SVG files written beside
// it, and a plot the report no longer has is removed.
func TestWriteFiles(t *testing.T) {
	r, err := Build("testdata/all")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.MkdirAll(filepath.Join(out, "report"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(out, "report", "gone.svg")
	if err := os.WriteFile(stale, []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(out, "REPORT.md")
	if err := r.WriteFiles(md); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	imgs := regexp.MustCompile(`!\[[^]]*\]\(([^)]+)\)`).FindAllStringSubmatch(string(b), -1)
	if len(imgs) != len(r.Plots()) || len(imgs) == 0 {
		t.Errorf("%d images for %d plots", len(imgs), len(r.Plots()))
	}
	for _, m := range imgs {
		got, err := os.ReadFile(filepath.Join(out, m[1]))
		if err != nil || !strings.HasPrefix(string(got), "<svg xmlns=") {
			t.Errorf("image %s: %v", m[1], err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale plot is still there: %v", err)
	}
}

// TestHTML: the HTML form carries every plot inline and escapes the text
// of the inputs (a check's detail, a pipeline's name, a note).
func TestHTML(t *testing.T) {
	r, err := Build("testdata/all")
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.HTML()
	if err != nil {
		t.Fatal(err)
	}
	html := string(h)
	if n := strings.Count(html, "<svg xmlns="); n != len(r.Plots()) {
		t.Errorf("%d inline SVGs for %d plots", n, len(r.Plots()))
	}
	for _, bad := range []string{"<script>", "<b>markup</b>", "<b>odd"} {
		if strings.Contains(html, bad) {
			t.Errorf("unescaped %q in the HTML", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;x&lt;/script&gt;", "&lt;b&gt;markup&lt;/b&gt;", `<strong class="modelled">modelled</strong>`, `<strong class="measured">measured</strong>`, "<code>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML lacks %q", want)
		}
	}
}

// TestMarkdownEscapes: the inputs' text is text in the Markdown too.
func TestMarkdownEscapes(t *testing.T) {
	r, err := Build("testdata/all")
	if err != nil {
		t.Fatal(err)
	}
	md := r.Markdown("report")
	for _, bad := range []string{"<script>", "<b>"} {
		if strings.Contains(md, bad) {
			t.Errorf("unescaped %q in the Markdown", bad)
		}
	}
}

// TestMalformedDefaults: fleet-defaults.json, shown beside fleet.json, is
// held to the same rules.
func TestMalformedDefaults(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{TrainerFleet, TrainerFleetDefaults} {
		b, err := os.ReadFile(filepath.Join("testdata", "all", n))
		if err != nil {
			t.Fatal(err)
		}
		if n == TrainerFleetDefaults {
			b = []byte(`{"runs": []}`)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Build(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, TrainerFleetDefaults)+": field runs: missing or empty") {
		t.Errorf("got %v", err)
	}
}

// TestStoreSection: a fleet run with the object store's traffic
// (testdata/all/fleet-full.json, a small run of sigctl fleet) shows its
// requests per side and unit, MinIO's CPU split between requests and
// bytes, the prices with their sources and the targets measured; one from
// before (testdata/all/fleet-run.json) says they were not measured and
// which command measures them, and the targets it cannot check are not
// measured rather than not met.
func TestStoreSection(t *testing.T) {
	r, err := Build("testdata/all")
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	for _, s := range r.Sections {
		var b strings.Builder
		for _, it := range s.Items {
			b.WriteString(it.Text + "\n")
			if it.Plot != nil {
				b.WriteString(it.Plot.Caption + "\n")
			}
			if it.Table != nil {
				b.WriteString(it.Table.Caption + "\n")
				for _, row := range it.Table.Rows {
					b.WriteString(strings.Join(row, " | ") + "\n")
				}
			}
		}
		text[s.ID] = b.String()
	}
	full, old := text["fleet-full"], text["fleet-run"]
	for _, want := range []string{"Object-store traffic, measured at the server", "SIG reader | 44 | 44 | 0 | 0 | 0 | 0 | 0 | 0 |",
		"4.4 | 0.03417 | 0.02345 | 0.01157", "split between requests and bytes by the fit", "a GET costs what 35.29 ms of a core does", "aws.amazon.com/s3/pricing",
		"aws.amazon.com/ec2/pricing/on-demand", "SIG reader requests per unit read | issue 28 | <= 2 | 4.4 | **not met**",
		"s3_get_per_1000_usd | 0.0001 USD per 1,000 requests"} {
		if !strings.Contains(full, want) {
			t.Errorf("the run with a store lacks %q:\n%s", want, full)
		}
	}
	if strings.Contains(full, "not measured") {
		t.Errorf("the run with a store says something was not measured:\n%s", full)
	}
	for _, want := range []string{"Object-store requests and bytes: not measured.", "`bash bench/fleet-run.sh` writes them",
		"SIG reader requests per unit read | issue 28 | <= 2 | – | not measured"} {
		if !strings.Contains(old, want) {
			t.Errorf("the run from before lacks %q:\n%s", want, old)
		}
	}
	if strings.Contains(old, "a GET costs what") {
		t.Errorf("the run from before has prices:\n%s", old)
	}
}
