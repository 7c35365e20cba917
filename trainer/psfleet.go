package trainer

import (
	"bufio"
	"context"
	"errors"
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

// ParameterServers configures the caught-up phase's parameter servers
// (ControllerConfig.ParameterServers; paramservers.go).
type ParameterServers struct {
	// Servers is how many `trainer ps` processes the controller starts, one
	// shard each; 0 with Addrs empty keeps the tables on the slice.
	Servers int
	// Addrs are servers already running (shard i at Addrs[i]); the
	// controller starts none then, and a dead one is its operator's to
	// restart.
	Addrs []string
	// Command runs `trainer ps`: the program and the arguments before the
	// server's flags. Default: this process's executable and "ps" (the
	// trainer binary runs them).
	Command []string
	// StoreArgs are the servers' checkpoint flags: --data DIR, or the
	// warehouse's --s3-* flags and --pipeline (`trainer ps`). Required
	// with Servers: a server that restarts without its checkpoints would
	// lose the tables.
	StoreArgs []string
	// Env is added to the servers' environment (e.g. SIG_S3_SECRET_KEY:
	// secrets stay off their command lines).
	Env []string
	// NoStacking keeps every table its own variable; by default tables of
	// one width and optimizer are stacked (paper V.B), rows distributed
	// cyclically over the servers.
	NoStacking bool
	// RestartDelay is the pause before a dead server is started again.
	// Default 100ms.
	RestartDelay time.Duration
}

// enabled reports whether the tables go to parameter servers.
func (p ParameterServers) enabled() bool { return p.Servers > 0 || len(p.Addrs) > 0 }

func (p ParameterServers) validate() error {
	switch {
	case p.Servers < 0 || p.Servers > 64:
		return fmt.Errorf("parameter servers: %d, want 0 to 64", p.Servers)
	case len(p.Addrs) > 0 && p.Servers > 0 && p.Servers != len(p.Addrs):
		return fmt.Errorf("parameter servers: %d servers but %d addresses", p.Servers, len(p.Addrs))
	case p.Servers > 0 && len(p.Addrs) == 0 && len(p.StoreArgs) == 0:
		return errors.New("parameter servers: no checkpoint store for them (StoreArgs: --data DIR or the --s3-* flags and --pipeline)")
	}
	return nil
}

// psFleet is the `trainer ps` processes a controller started: one per
// shard, each restarted on its address when it dies (a server restarts from
// its newest checkpoint; the controller then rolls every server back to the
// committed step, paramservers.go).
type psFleet struct {
	log   *slog.Logger
	env   []string
	delay time.Duration
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	procs []*psProc
}

// psProc is one server process.
type psProc struct {
	shard int
	argv  []string // without --listen

	mu       sync.Mutex
	addr     string
	cmd      *exec.Cmd
	starts   int
	exitedCh chan struct{}
}

// startPSFleet starts cfg.Servers servers and returns once each listens.
func startPSFleet(ctx context.Context, cfg ParameterServers, log *slog.Logger) (*psFleet, error) {
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
	f := &psFleet{log: log, env: cfg.Env, delay: delay, ctx: fctx, stop: stop}
	for i := range cfg.Servers {
		a := append(append([]string(nil), argv...), "--shard", fmt.Sprint(i), "--shards", fmt.Sprint(cfg.Servers))
		f.procs = append(f.procs, &psProc{shard: i, argv: append(a, cfg.StoreArgs...), addr: "127.0.0.1:0"})
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
func (f *psFleet) start(ctx context.Context, p *psProc) error {
	p.mu.Lock()
	addr := p.addr
	p.mu.Unlock()
	cmd := exec.Command(p.argv[0], append(append([]string(nil), p.argv[1:]...), "--listen", addr)...)
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
func (f *psFleet) supervise(p *psProc) {
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
func (f *psFleet) addrs() []string {
	var out []string
	for _, p := range f.procs {
		p.mu.Lock()
		out = append(out, p.addr)
		p.mu.Unlock()
	}
	return out
}

// restarts is how many times servers were started again after dying.
func (f *psFleet) restarts() int {
	n := 0
	for _, p := range f.procs {
		p.mu.Lock()
		n += p.starts - 1
		p.mu.Unlock()
	}
	return n
}

// pid is shard i's process id (tests kill it).
func (f *psFleet) pid(i int) int {
	p := f.procs[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// close stops the servers (SIGTERM, then SIGKILL after 5s) and waits.
func (f *psFleet) close() {
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
