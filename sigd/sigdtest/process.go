package sigdtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/devenv"
)

// builds caches the binaries built by this test process.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// FreeAddr returns an address on 127.0.0.1 that was free a moment ago, to
// tell a process to listen on (devenv.FreeAddr).
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := devenv.FreeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// BuildCommand builds a command of the repository (e.g. "cmd/sigd") once
// per test process and returns the binary's path. Call RemoveBuilds from
// TestMain to delete the binaries.
func BuildCommand(tb testing.TB, pkg string) string {
	tb.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if p, ok := builds.bins[pkg]; ok {
		return p
	}
	if err, ok := builds.errs[pkg]; ok {
		tb.Fatal(err)
	}
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "sigdtest-bin")
		if err != nil {
			tb.Fatal(err)
		}
		builds.dir, builds.bins, builds.errs = d, map[string]string{}, map[string]error{}
	}
	root := repoRoot(tb)
	out := filepath.Join(builds.dir, filepath.Base(pkg))
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(goBin, "build", "-o", out, "./"+pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		builds.errs[pkg] = fmt.Errorf("sigdtest: go build %s: %v\n%s", pkg, err, b)
		tb.Fatal(builds.errs[pkg])
	}
	builds.bins[pkg] = out
	return out
}

// RemoveBuilds deletes the binaries BuildCommand built.
func RemoveBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
		builds.dir, builds.bins, builds.errs = "", nil, nil
	}
}

// Grpcurl returns bin/grpcurl of the repository (installed by make deps,
// pinned in the Makefile). A missing binary fails the test: it never skips.
func Grpcurl(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(repoRoot(tb), "bin", "grpcurl")
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("%s not found: run make deps", p)
	}
	return p
}

// CheckHealth lists the services of the gRPC server at addr with grpcurl
// (server reflection, no token) and checks that the standard health
// service answers SERVING for each of them and for the server (""), as
// grpc-health-probe or a load balancer would ask. It returns the services.
func CheckHealth(tb testing.TB, addr string) []string {
	tb.Helper()
	bin := Grpcurl(tb)
	out, err := exec.Command(bin, "-plaintext", addr, "list").CombinedOutput()
	if err != nil {
		tb.Fatalf("grpcurl list %s: %v\n%s", addr, err, out)
	}
	services := strings.Fields(string(out))
	for _, svc := range append([]string{""}, services...) {
		out, err := exec.Command(bin, "-plaintext", "-d", fmt.Sprintf(`{"service": %q}`, svc), addr,
			"grpc.health.v1.Health/Check").CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"SERVING"`) {
			tb.Errorf("health of %q at %s: %v\n%s", svc, addr, err, out)
		}
	}
	return services
}

// Process is a sigd (or sigd worker) subprocess.
type Process struct {
	Cmd *exec.Cmd
	// Addr and HTTPAddr are what `sigd serve` reported on stderr.
	Addr, HTTPAddr string
	// Stderr is everything the process wrote to stderr so far.
	Stderr *SyncBuffer

	done chan struct{}
	err  error
}

var listening = regexp.MustCompile(`sigd: listening grpc=(\S+) http=(\S+)`)

// StartProcess runs bin with args (and extra environment variables) and,
// for `serve` and `dev`, waits until it reports its addresses. The process
// is killed when the test ends.
func StartProcess(tb testing.TB, bin string, args []string, env ...string) *Process {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// Killed with the test process, so a failed test leaves nothing running.
	cmd.SysProcAttr = DeathSignal()
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = io.Discard
	// SIGDTEST_LOG_DIR keeps each process's whole output, stdout too, in
	// <dir>/<binary>-<random>.log (first line: the command): the tail a
	// failed test prints is 6,000 bytes of stderr, and a SIGQUIT's
	// goroutine dump of a stuck process is longer.
	var logFile *os.File
	if dir := os.Getenv("SIGDTEST_LOG_DIR"); dir != "" {
		f, err := os.CreateTemp(dir, filepath.Base(bin)+"-*.log")
		if err != nil {
			tb.Fatalf("sigdtest: SIGDTEST_LOG_DIR: %v", err)
		}
		fmt.Fprintf(f, "%s %q\n", bin, args)
		logFile = f
		cmd.Stdout = f
		cmd.Stderr = io.MultiWriter(pw, f)
	}
	p := &Process{Cmd: cmd, Stderr: &SyncBuffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("sigdtest: start %s: %v", bin, err)
	}
	addrs := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.Stderr, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addrs <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("%s %v stderr tail:\n%s", filepath.Base(bin), args, tail(p.Stderr.String(), 6000))
		}
	})
	if len(args) > 0 && (args[0] == "serve" || args[0] == "dev") {
		select {
		case a := <-addrs:
			p.Addr, p.HTTPAddr = a[0], a[1]
		case <-p.done:
			tb.Fatalf("sigdtest: %s exited before serving: %v\n%s", bin, p.err, p.Stderr.String())
		case <-time.After(60 * time.Second):
			tb.Fatalf("sigdtest: %s did not report its addresses within 60s:\n%s", bin, p.Stderr.String())
		}
	}
	return p
}

// Kill kills the process with SIGKILL (a crash: no shutdown code runs) and
// waits for it to exit. Killing an exited process does nothing.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
