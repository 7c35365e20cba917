package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/workers"
)

// TestWhy: sigctl why against a real sigd whose one worker is held: the
// job's reported stall by cause, then the pipeline's entries not ready,
// queued behind ranking's work at 900, one running; bad input is a usage
// or InvalidArgument error, another client's pipeline refused.
func TestWhy(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 50, Seed: 4})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WrapRunner: func(r workers.Runner) workers.Runner {
		return workers.RunnerFunc(func(ctx context.Context, tk workers.Task) (workers.Result, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return workers.Result{}, ctx.Err()
			}
			return r.Run(ctx, tk)
		})
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "low", 100, sigdtest.DSL(t, "ctr_small"), w.All())); err != nil {
		t.Fatal(err)
	}
	// The worker takes ctr's first block; then ranking's work comes ahead.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no task leased")
		}
		if st := srv.Queue().Depths(); len(st) > 0 && st[0].Leased > 0 {
			break
		}
	}
	if _, err := srv.SIG(t, "ranking").SubmitGraph(ctx, sigdtest.Submit("ranking", "top", 900, sigdtest.DSL(t, "ranking"), w.All())); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SIG(t, "trainer").ReportTrainerStatus(ctx, &sigv1.TrainerStatus{Job: "low-job", Client: "ctr", Pipeline: "low", Phase: "initial",
		InputStallSeconds: 720, Stall: []*sigv1.StallCause{{Kind: "queued", Seconds: 720, Client: "ranking", Priority: 900,
			Sentence: `12m0s waiting on unigrams(lower(col("query"))), block b3, queued behind 340 tasks (340 of client ranking at priority 900)`}}}); err != nil {
		t.Fatal(err)
	}
	ctr := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["ctr"]}
	code, out, errs := sigctl(t, append([]string{"why", "--client", "ctr", "--pipeline", "low"}, ctr...)...)
	if code != 0 {
		t.Fatalf("sigctl why: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("sigctl why:\n%s", out)
	for _, re := range []string{
		`(?m)^job low-job \(ctr/low, initial\): input stall 12m0s by cause$`,
		`(?m)^  12m0s waiting on .*queued behind 340 tasks \(340 of client ranking at priority 900\)$`,
		`(?m)^now: \d+ entries of ctr/low not ready$`,
		`(?m)^query_ids +hash\(unigrams\(lower\(col\("query"\)\)\).* +queued +\d+ of ranking@900`,
		`(?m) running .*on \S+ for `,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %q", re)
		}
	}
	// --json: the same jobs and entries, as one JSON object.
	code, out, errs = sigctl(t, append([]string{"why", "--json", "--client", "ctr", "--pipeline", "low"}, ctr...)...)
	if code != 0 {
		t.Fatalf("sigctl why --json: exit %d\n%s%s", code, out, errs)
	}
	var got struct {
		Jobs []struct {
			Job   string `json:"job"`
			Stall []struct {
				Kind     string  `json:"kind"`
				Seconds  float64 `json:"seconds"`
				Client   string  `json:"client"`
				Priority int     `json:"priority"`
			} `json:"stall"`
		} `json:"jobs"`
		Now struct {
			NotReady int `json:"notReady"`
			Entries  []struct {
				BlockID string `json:"blockId"`
				Kind    string `json:"kind"`
			} `json:"entries"`
		} `json:"now"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("sigctl why --json: %v\n%s", err, out)
	}
	if len(got.Jobs) != 1 || got.Jobs[0].Job != "low-job" || len(got.Jobs[0].Stall) != 1 || got.Jobs[0].Stall[0].Seconds != 720 ||
		got.Jobs[0].Stall[0].Client != "ranking" || got.Jobs[0].Stall[0].Priority != 900 || got.Now.NotReady == 0 ||
		len(got.Now.Entries) == 0 || got.Now.Entries[0].BlockID == "" || got.Now.Entries[0].Kind == "" {
		t.Errorf("sigctl why --json: %+v\n%s", got, out)
	}
	if code, _, _ := sigctl(t, append([]string{"why", "extra", "--client", "ctr", "--pipeline", "low"}, ctr...)...); code != 2 {
		t.Errorf("a stray argument: exit %d, want 2", code)
	}
	if code, _, errs := sigctl(t, append([]string{"why", "--client", "ctr"}, ctr...)...); code != 1 || !regexp.MustCompile(`InvalidArgument.*pipeline`).MatchString(errs) {
		t.Errorf("no pipeline: exit %d, %s", code, errs)
	}
	cvr := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["cvr"]}
	if code, _, errs := sigctl(t, append([]string{"why", "--client", "ctr", "--pipeline", "low"}, cvr...)...); code != 1 || !regexp.MustCompile(`PermissionDenied`).MatchString(errs) {
		t.Errorf("cvr asking about ctr's pipeline: exit %d, %s", code, errs)
	}
}
