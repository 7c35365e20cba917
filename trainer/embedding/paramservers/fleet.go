package paramservers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fleet is the `trainer ps` processes a job started: one per shard, each
// restarted on its address when it dies (a server restarts from its newest
// checkpoint; the job's next restore then rolls every server back to the
// committed step, Servers.Place).
type fleet struct {
	log   *slog.Logger
	token *jobToken // the one token the servers admit
	env   []string
	delay time.Duration
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	procs []*proc
}

// proc is one server process.
type proc struct {
	shard int
	argv  []string // without --listen

	mu       sync.Mutex
	addr     string
	cmd      *exec.Cmd
	starts   int
	exitedCh chan struct{}
}

// startFleet starts cfg.Servers servers and returns once each listens.
func startFleet(ctx context.Context, cfg Config, log *slog.Logger) (*fleet, error) {
	argv := cfg.Command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("parameter servers: %w", err)
		}
		argv = []string{exe, "ps"}
	}
	delay := cfg.RestartDelay
	if delay <= 0 {
		delay = 100 * time.Millisecond
	}
	fctx, stop := context.WithCancel(context.Background())
	f := &fleet{log: log, token: newJobToken(cfg.Client), env: cfg.Env, delay: delay, ctx: fctx, stop: stop}
	for i := range cfg.Servers {
		a := append(append([]string(nil), argv...), "--shard", fmt.Sprint(i), "--shards", fmt.Sprint(cfg.Servers))
		f.procs = append(f.procs, &proc{shard: i, argv: append(a, cfg.StoreArgs...), addr: "127.0.0.1:0"})
	}
	for _, p := range f.procs {
		if err := f.start(ctx, p); err != nil {
			f.close()
			return nil, err
		}
		f.wg.Go(func() { f.supervise(p) })
	}
	return f, nil
}

// start runs p on its address (any port the first time) and waits until
// it prints the address it listens on.
func (f *fleet) start(ctx context.Context, p *proc) error {
	p.mu.Lock()
	addr := p.addr
	p.mu.Unlock()
	// The token by its file's path, the file gone once the server has
	// read it (it listens) or exited: the secret is on no command line and
	// on disk only while the server starts (jobToken).
	tokens, removeTokens, err := f.token.writeFile()
	if err != nil {
		return err
	}
	defer removeTokens()
	cmd := exec.Command(p.argv[0], append(append([]string(nil), p.argv[1:]...), "--tokens", tokens, "--listen", addr)...)
	cmd.SysProcAttr = childAttr()
	cmd.Env = append(os.Environ(), f.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("parameter server %d: %w", p.shard, err)
	}
	listening := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "listening on "); ok && !sent {
				listening <- a
				sent = true
				continue
			}
			f.log.Debug("parameter server", "shard", p.shard, "line", line)
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case a := <-listening:
		p.mu.Lock()
		p.addr, p.cmd, p.exitedCh = a, cmd, exited
		p.starts++
		p.mu.Unlock()
		f.log.Info("parameter server listening", "shard", p.shard, "addr", a, "pid", cmd.Process.Pid, "start", p.starts)
		return nil
	case <-exited:
		return fmt.Errorf("parameter server %d exited before listening (%v)", p.shard, cmd.ProcessState)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return ctx.Err()
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("parameter server %d did not listen within 30s", p.shard)
	}
}

// supervise restarts p whenever it exits, until the fleet stops.
func (f *fleet) supervise(p *proc) {
	for {
		p.mu.Lock()
		exited := p.exitedCh
		p.mu.Unlock()
		select {
		case <-f.ctx.Done():
			return
		case <-exited:
		}
		if f.ctx.Err() != nil {
			return
		}
		f.log.Warn("parameter server died: restarting it from its newest checkpoint", "shard", p.shard)
		for f.ctx.Err() == nil {
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(f.delay):
			}
			err := f.start(f.ctx, p)
			if err == nil {
				break
			}
			f.log.Warn("parameter server restart", "shard", p.shard, "err", err)
		}
	}
}

// addrs are the servers' addresses, shard by shard.
func (f *fleet) addrs() []string {
	var out []string
	for _, p := range f.procs {
		p.mu.Lock()
		out = append(out, p.addr)
		p.mu.Unlock()
	}
	return out
}

// restarts is how many times servers were started again after dying.
func (f *fleet) restarts() int {
	n := 0
	for _, p := range f.procs {
		p.mu.Lock()
		n += p.starts - 1
		p.mu.Unlock()
	}
	return n
}

// pid is shard i's process id (tests kill it).
func (f *fleet) pid(i int) int {
	p := f.procs[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// close stops the servers (SIGTERM, then SIGKILL after 5s) and waits.
func (f *fleet) close() {
	f.stop()
	f.wg.Wait()
	for _, p := range f.procs {
		p.mu.Lock()
		cmd, exited := p.cmd, p.exitedCh
		p.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}
