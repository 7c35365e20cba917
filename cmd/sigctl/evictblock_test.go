package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestEvictBlockCommand: against a real sigd, an operator recomputes one
// block and evicts another with sigctl evict-block; each is audited, the
// first turns pending at once, the second loses its entry, and both are
// ready again once the pipeline reads. Usage errors send nothing; a
// client's token is refused.
func TestEvictBlockCommand(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 200, Seed: 9})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, `input q = hash(col("query"), buckets=100)`, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	key := sol.Inputs[0].ComponentKey
	k, err := canon.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b0, b1 := w.Blocks[0].ID, w.Blocks[1].ID
	conn := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["operator"]}

	for _, args := range [][]string{
		{key, b0},                       // no reason
		{key, b0, "--reason", " "},      // blank reason
		{key, "--reason", "r"},          // no block
		{key, b0, "x", "--reason", "r"}, // extra argument
	} {
		if code, _, errs := sigctl(t, append(append([]string{"evict-block"}, conn...), args...)...); code != 2 {
			t.Errorf("evict-block %q: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, _, errs := sigctl(t, "evict-block", key, b0, "--reason", "r", "--sigd", srv.Addr(), "--token", srv.Tokens["ctr"]); code != 1 ||
		!strings.Contains(errs, "PermissionDenied") {
		t.Errorf("client token: exit %d: %s", code, errs)
	}
	if m, _ := srv.Frontend().Cache().Memos(k); m[blockref.ParseMemo(b0)].State != matching.MemoReady || m[blockref.ParseMemo(b1)].State != matching.MemoReady {
		t.Fatalf("refused commands changed the blocks: %v", m)
	}

	code, out, errs := sigctl(t, append([]string{"evict-block", key, b0, "--reason", "suspect run", "--recompute"}, conn...)...)
	if code != 0 || !strings.Contains(out, "recomputing block "+b0) || !strings.Contains(out, "1 objects deleted") ||
		!strings.Contains(out, "pipeline  ctr/p") {
		t.Errorf("recompute: exit %d (%s):\n%s", code, errs, out)
	}
	code, out, errs = sigctl(t, append([]string{"evict-block", key, b1, "--reason", "bad disk", "--json"}, conn...)...)
	var resp map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || resp["auditId"] == nil || resp["objectsDeleted"] != 1.0 {
		t.Errorf("evict --json: exit %d (%s):\n%s", code, errs, out)
	}
	if _, err := srv.Frontend().Cache().Memo(k, blockref.ParseMemo(b1)); err == nil {
		t.Errorf("evicted block %s still has an entry", b1)
	}
	code, out, _ = sigctl(t, "audit", "--sigd", srv.Addr(), "--token", srv.Tokens["operator"])
	if code != 0 || !strings.Contains(out, "recompute block "+b0) || !strings.Contains(out, "suspect run") ||
		!strings.Contains(out, "block "+b1) || !strings.Contains(out, "bad disk") {
		t.Errorf("audit after the block evictions:\n%s", out)
	}
	if _, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"}); err != nil {
		t.Fatal(err)
	}
	sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
}
