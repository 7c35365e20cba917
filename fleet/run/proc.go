package run

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sigdata/sig/internal/cpuclock"
)

// proc is a child process whose CPU time the run measures.
type proc struct {
	name string
	cmd  *exec.Cmd
	pid  int
	log  *tail

	mu    sync.Mutex
	lines []func(string) bool // line watchers, dropped once they return true

	done    chan struct{}
	waitErr error
	exitCPU time.Duration // user+system from Wait4's rusage, once done
}

// startProc starts bin with args; its stdout and stderr go to a bounded
// log tail, line by line to the watchers.
func startProc(name, bin string, args []string, env ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childProcAttr()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{name: name, cmd: cmd, log: &tail{max: 64 << 10}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.log.Write([]byte(line + "\n"))
			p.mu.Lock()
			keep := p.lines[:0]
			for _, w := range p.lines {
				if !w(line) {
					keep = append(keep, w)
				}
			}
			p.lines = keep
			p.mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		if st := cmd.ProcessState; st != nil {
			p.exitCPU = st.UserTime() + st.SystemTime()
		}
		pw.Close()
		close(p.done)
	}()
	return p, nil
}

// waitLine waits until the process writes a line for which match returns a
// non-empty string, and returns it.
func (p *proc) waitLine(ctx context.Context, timeout time.Duration, match func(string) string) (string, error) {
	got := make(chan string, 1)
	p.mu.Lock()
	p.lines = append(p.lines, func(line string) bool {
		if s := match(line); s != "" {
			got <- s
			return true
		}
		return false
	})
	p.mu.Unlock()
	select {
	case s := <-got:
		return s, nil
	case <-p.done:
		return "", fmt.Errorf("%s exited before it was ready: %v\n%s", p.name, p.waitErr, p.log.String())
	case <-time.After(timeout):
		return "", fmt.Errorf("%s not ready within %v:\n%s", p.name, timeout, p.log.String())
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// cpu is the process's CPU time so far (cpuOf), or at exit.
func (p *proc) cpu() time.Duration {
	if p.exited() {
		return p.exitCPU
	}
	d, err := cpuOf(p.pid)
	if err != nil {
		// It exited meanwhile: its rusage comes with Wait.
		select {
		case <-p.done:
			return p.exitCPU
		case <-time.After(5 * time.Second):
			return 0
		}
	}
	return d
}

// stop sends SIGTERM and waits for the exit (SIGKILL after the grace
// period).
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuOf reads the CPU time (user plus system, every thread, exited ones
// included) of any process of ours from the kernel's per-process CPU clock
// (internal/cpuclock): at nanosecond resolution rather than in clock
// ticks, so the CPU of a few units is not rounded to 10 ms.
func cpuOf(pid int) (time.Duration, error) { return cpuclock.Process(pid) }

// statCPU reads utime+stime from /proc/<pid>/stat (clock ticks of
// 1/100 s: USER_HZ is 100 on Linux), to check cpuOf against.
func statCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold spaces: fields
	// count from after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	// Fields after ')': state(0) ppid(1) ... utime(11) stime(12).
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+st) * 10 * time.Millisecond, nil
}

// childrenOf returns the pids whose parent is pid and whose command is
// comm (MinIO, which sigd dev starts).
func childrenOf(pid int, comm string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && s[open+1:close] == comm {
			out = append(out, c)
		}
	}
	return out
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
