package trainer

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestRunCommand runs `trainer run` (controller, hosts and readers in one
// process) to the end and reads its JSON report. Its caught-up phase keeps
// the tables on two parameter servers, `trainer ps` processes the command
// starts itself (its own executable, checkpoints in the bucket, the S3 keys
// in their environment), the wait on them priced at HBM's bandwidth to keep
// the steps short.
func TestRunCommand(t *testing.T) {
	e := newEnv(t, 3, 600, sigd.Options{})
	bin := sigdtest.BuildCommand(t, "cmd/trainer")
	dir := t.TempDir()
	graph := filepath.Join(dir, "graph.sig")
	if err := os.WriteFile(graph, []byte(sigdtest.DSL(t, "cvr")), 0o600); err != nil {
		t.Fatal(err)
	}
	m := e.w.MinIO
	r := e.w.All()
	report := filepath.Join(dir, "report.json")
	cmd := exec.Command(bin, "run", "--client", "ctr", "--pipeline", "runcmd", "--graph", graph,
		"--range", fmt.Sprintf("%d:%d", r.StartMicros, r.EndMicros), "--sigd", e.sigd.Addr(), "--token", e.sigd.Tokens["trainer"],
		"--s3-endpoint", m.Endpoint, "--s3-access-key", m.AccessKey, "--s3-secret-key", m.SecretKey, "--s3-bucket", sigdtest.Bucket,
		"--kafka-brokers", strings.Join(e.w.Kafka.Brokers, ","), "--hosts", "2", "--chips", "2", "--caught-up-chips", "1",
		"--epoch-units", "1", "--vocab", "4096", "--status-interval", "0", "--report-json", report, "--mode", "pipelined",
		"--ps-servers", "2", "--ps-bandwidth", "1.2e12")
	done := make(chan error, 1)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("trainer run: %v\n%s", err, out.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("trainer run did not finish\n%s", out.String())
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Exit != "done" || rep.Units != 3 || !strings.Contains(out.String(), "goodput") {
		t.Fatalf("report: exit %q, %d units\n%s", rep.Exit, rep.Units, out.String())
	}
	checkExactlyOnce(t, e, "runcmd")
	if p := rep.ParameterServers; p == nil || p.Servers != 2 || p.Moves != 1 || p.Steps == 0 || p.Checkpoints == 0 {
		t.Fatalf("parameter servers: %+v\n%s", p, out.String())
	}
	if !strings.Contains(out.String(), "parameter servers: 2") {
		t.Fatalf("the text report does not show the parameter servers:\n%s", out.String())
	}
}
