package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// proc is a restartable subprocess of the test (a reader, a host or the
// controller), killed with the test.
type proc struct {
	t    *testing.T
	name string
	bin  string
	args []string
	log  *sigdtest.SyncBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	runs int
}

func newProc(t *testing.T, name, bin string, args ...string) *proc {
	p := &proc{t: t, name: name, bin: bin, args: args, log: &sigdtest.SyncBuffer{}}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() || os.Getenv("TRAINER_TEST_LOG") != "" {
			s := p.log.String()
			if len(s) > 6000 {
				s = s[len(s)-6000:]
			}
			t.Logf("--- %s (%d runs) log tail:\n%s", name, p.runs, s)
		}
	})
	return p
}

func (p *proc) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = sigdtest.DeathSignal()
	fmt.Fprintf(p.log, "=== start %s (run %d)\n", p.name, p.runs+1)
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.done, p.runs = cmd, make(chan struct{}), p.runs+1
	done := p.done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
}

// running reports whether the process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// signal sends sig; kill sends SIGKILL and waits for the process to die.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		<-done
	}
	fmt.Fprintf(p.log, "=== killed %s\n", p.name)
}

// wait waits up to d for the process to exit and returns its error.
func (p *proc) wait(d time.Duration) (exited bool, err error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// pipelineProcs are the processes of one training pipeline: readers, a
// controller and hosts, as separate programs (cmd/reader, cmd/trainer).
type pipelineProcs struct {
	readers    []*proc
	controller *proc
	hosts      []*proc
	reportPath string
	client     trainerv1.ControllerClient // as the operator
}

// waitTraining waits until the controller runs an epoch attempt (or d
// passes, or the controller exits); it reports whether it does.
func (pp *pipelineProcs) waitTraining(d time.Duration) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) && pp.controller.running() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := pp.client.Status(ctx, &trainerv1.StatusRequest{})
		cancel()
		if err == nil && st.GetStatus() == "training" {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// startPipeline builds the commands (once per test binary) and starts the
// pipeline's processes against env. extra adds controller flags.
func startPipeline(t *testing.T, e *env, pipeline string, nReaders, nHosts int, extra ...string) *pipelineProcs {
	t.Helper()
	trainerBin := sigdtest.BuildCommand(t, "cmd/trainer")
	readerBin := sigdtest.BuildCommand(t, "cmd/reader")
	dir := t.TempDir()
	// One token file for the readers and the controller, with sigd's
	// tokens: hosts authenticate with the trainer token everywhere.
	var f auth.File
	for _, p := range sigdtest.Principals {
		f.Tokens = append(f.Tokens, auth.Entry{Token: e.sigd.Tokens[p.Name], Principal: p})
	}
	b, _ := json.Marshal(f)
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, b, 0o600); err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(dir, "graph.sig")
	if err := os.WriteFile(graph, []byte(sigdtest.DSL(t, "ctr_small")), 0o600); err != nil {
		t.Fatal(err)
	}
	m := e.w.MinIO
	s3 := []string{"--s3-endpoint", m.Endpoint, "--s3-access-key", m.AccessKey, "--s3-secret-key", m.SecretKey, "--s3-bucket", sigdtest.Bucket}
	pp := &pipelineProcs{reportPath: filepath.Join(dir, "report.json")}
	var raddrs []string
	for i := 0; i < nReaders; i++ {
		addr := sigdtest.FreeAddr(t)
		raddrs = append(raddrs, addr)
		pp.readers = append(pp.readers, newProc(t, fmt.Sprintf("reader%d", i), readerBin,
			append([]string{"--listen", addr, "--tokens", tokens, "--s3-retry-for", "5s"}, s3...)...))
	}
	caddr := sigdtest.FreeAddr(t)
	r := e.w.All()
	token := e.sigd.Tokens["trainer"]
	args := append([]string{"controller", "--listen", caddr, "--tokens", tokens,
		"--client", "ctr", "--pipeline", pipeline, "--graph", graph,
		"--range", fmt.Sprintf("%d:%d", r.StartMicros, r.EndMicros),
		"--sigd", e.sigd.Addr(), "--token", token, "--kafka-brokers", strings.Join(e.w.Kafka.Brokers, ","),
		"--readers", strings.Join(raddrs, ","), "--hosts", fmt.Sprint(nHosts),
		"--chips", "4", "--caught-up-chips", "1", "--epoch-units", "2", "--batch-size", "128",
		"--read-batch-rows", "256", "--vocab", "4096", "--compile-time", "20ms", "--hold-poll", "500ms",
		"--status-interval", "0", "--report-json", pp.reportPath, "--report-text", "", "--log-level", "debug"}, s3...)
	args = append(args, extra...)
	pp.controller = newProc(t, "controller", trainerBin, args...)
	cc, err := cli.Dial(caddr, e.sigd.Tokens["operator"], false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	pp.client = trainerv1.NewControllerClient(cc)
	for i := 0; i < nHosts; i++ {
		pp.hosts = append(pp.hosts, newProc(t, fmt.Sprintf("host%d", i), trainerBin,
			"host", "--controller", caddr, "--id", fmt.Sprintf("h%d", i), "--token", token, "--log-level", "debug"))
	}
	for _, p := range pp.readers {
		p.start()
	}
	pp.controller.start()
	for _, p := range pp.hosts {
		p.start()
	}
	return pp
}

func (pp *pipelineProcs) report(t *testing.T) Report {
	t.Helper()
	b, err := os.ReadFile(pp.reportPath)
	if err != nil {
		t.Fatalf("controller report: %v", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("controller report: %v", err)
	}
	return r
}
