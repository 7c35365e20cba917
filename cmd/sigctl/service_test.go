package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestServiceCommands: submit, watch, set-priority, queues, stats and
// quarantine against a real sigd, each as text and (where it has it) as
// JSON, with their usage errors (exit 2, nothing sent) and a refused call
// (exit 1). SIG_SIGD and SIG_TOKEN stand for --sigd and --token.
func TestServiceCommands(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 100, Seed: 4})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	graph := filepath.Join(t.TempDir(), "q.sig")
	if err := os.WriteFile(graph, []byte(`input q = hash(col("query"), buckets=100)`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.All()
	rng := fmt.Sprintf("%d:%d", r.StartMicros, r.EndMicros)
	ctr := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["ctr"]}
	op := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["operator"]}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := sigctl(t, args...)
		if code != want {
			t.Fatalf("sigctl %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errs)
		}
		return out + errs
	}
	matches := func(what, out string, res ...string) {
		t.Helper()
		for _, re := range res {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s: no line matching %q in:\n%s", what, re, out)
			}
		}
	}

	for _, args := range [][]string{
		{"submit", "--client", "ctr", "--pipeline", "p", "--range", rng},                   // no FILE
		{"submit", graph, "--client", "ctr", "--pipeline", "p", "--range", "yesterday"},    // bad range
		{"submit", graph, graph, "--client", "ctr", "--pipeline", "p", "--range", rng},     // two files
		{"submit", graph, "--client", "ctr", "--pipeline", "p", "--range", rng, "--bogus"}, // unknown flag
		{"submit", graph, "--client", "ctr", "--pipeline", "p", "--range", rng, "--memoize", "q=sometimes"},
		{"quarantine", "release", "k"}, // no block
		{"quarantine", "frob"},         // no such subcommand
		{"builds", "lift"},             // no build
		{"builds", "frob"},
		{"stats", "extra"}, // a stray argument is refused, not ignored
		{"queues", "extra"},
		{"watch", "extra", "--client", "ctr", "--pipeline", "p"},
		{"set-priority", "extra", "--client", "ctr", "--pipeline", "p", "--priority", "3"},
	} {
		run(2, append(args, ctr...)...)
	}
	if st, _ := srv.SIG(t, "operator").Stats(t.Context(), nil); st.GetSubmits() != 0 {
		t.Fatalf("usage errors sent a submission: %v", st)
	}

	out := run(0, append([]string{"submit", graph, "--client", "ctr", "--pipeline", "p", "--priority", "5", "--range", rng}, ctr...)...)
	matches("submit", out, `(?m)^components 1 \(hits 0\), blocks hit 0 missed 2, tasks enqueued 2$`,
		`(?m)^pipeline ctr/p: \d ready, \d pending, 0 failed blocks; complete=(true|false)$`,
		`(?m)^INPUT +COMPONENT +TYPE +READY +PENDING +FAILED +COVER$`, `(?m)^q +[0-9a-f]{12} +int64 +\d +\d +0 +whole$`)
	var sub map[string]any
	out = run(0, append([]string{"submit", graph, "--json", "--client", "ctr", "--pipeline", "p", "--priority", "5", "--range", rng}, ctr...)...)
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["components"] != 1.0 || sub["solution"] == nil {
		t.Errorf("submit --json: %v:\n%s", err, out)
	}

	// The watch ends once the solution is complete.
	out = run(0, append([]string{"watch", "--client", "ctr", "--pipeline", "p"}, ctr...)...)
	matches("watch", out, `(?m)^pipeline ctr/p: `, `complete=true|(?m)^[0-9a-f]{12} \S+ READY$`)
	out = run(0, append([]string{"watch", "--client", "ctr", "--pipeline", "p", "--json"}, ctr...)...)
	matches("watch --json", out, `"solution":\s+\{`, `"complete":\s+true`)

	out = run(0, append([]string{"set-priority", "--client", "ctr", "--pipeline", "p", "--priority", "7"}, ctr...)...)
	matches("set-priority", out, `(?m)^ctr/p: priority 7, 0 queued tasks re-prioritized$`)

	out = run(0, append([]string{"queues"}, op...)...)
	matches("queues", out, `(?m)^CLIENT +PRIORITY +QUEUED +LEASED$`)
	out = run(0, append([]string{"queues", "--json"}, op...)...)
	if !json.Valid([]byte(out)) {
		t.Errorf("queues --json:\n%s", out)
	}

	t.Setenv("SIG_SIGD", srv.Addr())
	t.Setenv("SIG_TOKEN", srv.Tokens["operator"])
	out = run(0, "stats")
	matches("stats", out, `(?m)^submits 2, component hit rate \d\.\d{3}, block hit rate \d\.\d{3} over \d+ block requests$`,
		`(?m)^components 1, pipelines 1, memo blocks 2 \(\d+ bytes\), pipelines per memo block: mean 1\.00, max 1$`,
		`(?m)^workers \d+ \(desired \d+\), tasks completed \d, quarantined 0, task latency p50 \d+\.\d{3}s p99 \d+\.\d{3}s$`,
		`(?m)^CLIENT +PRIORITY +QUEUED +LEASED$`)
	var st map[string]any
	if out = run(0, "stats", "--json"); json.Unmarshal([]byte(out), &st) != nil || st["submits"] != "2" || st["memoBlocks"] != "2" {
		t.Errorf("stats --json:\n%s", out)
	}
	out = run(0, "quarantine")
	matches("quarantine", out, `(?m)^COMPONENT +BLOCK +ATTEMPTS +CLIENT +ERROR$`)
	out = run(1, append([]string{"quarantine", "release", strings.Repeat("a", 64), w.Blocks[0].ID}, ctr...)...)
	matches("quarantine release with a client's token", out, `PermissionDenied`)
	out = run(0, "builds")
	matches("builds", out, `(?m)^BUILD +SINCE +REASON$`)
	out = run(1, append([]string{"builds", "lift", "some build"}, ctr...)...)
	matches("builds lift with a client's token", out, `PermissionDenied`)

	// An override of the insertion policy (sigd runs the paper's): the
	// input is the readers', and the solution says why.
	out = run(0, append([]string{"submit", graph, "--client", "ctr", "--pipeline", "p-never", "--range", rng, "--memoize", "q=never"}, ctr...)...)
	matches("submit --memoize", out, `(?m)^q +[0-9a-f]{12} +int64 +2 +0 +0 +readers, from raw columns$`,
		`(?m)^q: never memoized \(the pipeline input's override\)`)
}
