package sigd_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestGrpcurl: a third-party client (grpcurl, pinned in the Makefile and
// installed by make deps) lists sigd's services through server reflection,
// without a token, and submits a graph as JSON with a bearer token, as the
// README shows. Without a token the submit is refused.
func TestGrpcurl(t *testing.T) {
	bin := sigdtest.Grpcurl(t)
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	out, err := run("", "-plaintext", srv.Addr(), "list")
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	for _, svc := range []string{"sig.v1.SIG", "sig.v1.Workers", "sig.v1.FeatureStats", "grpc.health.v1.Health"} {
		if !strings.Contains(out, svc+"\n") {
			t.Errorf("grpcurl list does not show %s:\n%s", svc, out)
		}
	}
	// Every service reports its health (sig.v1.Workers and
	// sig.v1.FeatureStats answered NotFound before).
	sigdtest.CheckHealth(t, srv.Addr())
	if out, err = run("", "-plaintext", srv.Addr(), "describe", "sig.v1.SIG.SubmitGraph"); err != nil || !strings.Contains(out, "SubmitGraphRequest") {
		t.Errorf("grpcurl describe: %v\n%s", err, out)
	}

	r := w.All()
	req, _ := json.Marshal(map[string]any{
		"client": "ctr", "pipeline": "from-grpcurl", "priority": 3,
		"graph": map[string]any{"raw_source": "ads", "dsl": "input q = hash(unigrams(lower(col(\"query\"))), buckets=1000)\n"},
		"range": map[string]any{"start_micros": r.StartMicros, "end_micros": r.EndMicros},
	})
	out, err = run(string(req), "-plaintext", "-d", "@", srv.Addr(), "sig.v1.SIG/SubmitGraph")
	if err == nil || !strings.Contains(out, "Unauthenticated") {
		t.Errorf("submit without a token: %v\n%s; want Unauthenticated", err, out)
	}
	out, err = run(string(req), "-plaintext", "-H", "authorization: Bearer "+srv.Tokens["ctr"], "-d", "@", srv.Addr(), "sig.v1.SIG/SubmitGraph")
	if err != nil {
		t.Fatalf("grpcurl SubmitGraph: %v\n%s", err, out)
	}
	var resp struct {
		Components    int `json:"components"`
		TasksEnqueued int `json:"tasksEnqueued"`
		Solution      struct {
			Client, Pipeline string
			BlocksPending    int `json:"blocksPending"`
			Inputs           []struct {
				Input        string `json:"input"`
				ComponentKey string `json:"componentKey"`
			} `json:"inputs"`
		} `json:"solution"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("grpcurl output is not the response as JSON: %v\n%s", err, out)
	}
	if resp.Components != 1 || resp.TasksEnqueued != 2 || resp.Solution.BlocksPending != 2 || len(resp.Solution.Inputs) != 1 ||
		resp.Solution.Inputs[0].Input != "q" || resp.Solution.Pipeline != "from-grpcurl" {
		t.Errorf("grpcurl SubmitGraph answered %s", out)
	}
	p, err := srv.Frontend().Cache().Pipeline("ctr", "from-grpcurl")
	if err != nil || p.Priority != 3 || len(p.Inputs) != 1 || p.Inputs[0].Component.String() != resp.Solution.Inputs[0].ComponentKey {
		t.Errorf("pipeline registered from grpcurl: %+v, %v", p, err)
	}
}
