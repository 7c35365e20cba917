package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	psv1 "github.com/sigdata/sig/proto/ps/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/embedding/ps"
)

// TestPSHelperProcess is not a test: it is the `trainer` command run as a
// child process by the tests below (the os/exec helper-process pattern), so
// they kill a real `trainer ps` without building a binary.
func TestPSHelperProcess(t *testing.T) {
	if os.Getenv("PS_TEST_HELPER") != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(runMain(args, os.Stdout, os.Stderr))
}

// psProcess is a `trainer ps` child process.
type psProcess struct {
	cmd  *exec.Cmd
	addr string
}

// startPS starts `trainer ps` admitting the callers of the token file
// tokens (sigdtest.WriteTokens).
func startPS(t *testing.T, addr string, shard, shards int, dir, tokens string, extra ...string) *psProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestPSHelperProcess$", "--",
		"ps", "--listen", addr, "--shard", fmt.Sprint(shard), "--shards", fmt.Sprint(shards), "--data", dir, "--tokens", tokens}, extra...)...)
	cmd.Env = append(os.Environ(), "PS_TEST_HELPER=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &psProcess{cmd: cmd}
	t.Cleanup(func() { p.kill() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- a
			}
		}
		close(lines)
	}()
	select {
	case a, ok := <-lines:
		if !ok {
			t.Fatalf("trainer ps shard %d exited before listening", shard)
		}
		p.addr = a
	case <-time.After(30 * time.Second):
		t.Fatalf("trainer ps shard %d did not start", shard)
	}
	return p
}

// TestPSHealth: a parameter server with authentication reports its health
// and lists its services without a token, like every SIG process (it
// served neither before).
func TestPSHealth(t *testing.T) {
	tokens, _ := sigdtest.WriteTokens(t, t.TempDir())
	p := startPS(t, "127.0.0.1:0", 0, 1, t.TempDir(), tokens)
	if services := sigdtest.CheckHealth(t, p.addr); !slices.Contains(services, "sig.ps.v1.ParameterServer") {
		t.Fatalf("grpcurl lists %v, not the parameter server", services)
	}
}

func (p *psProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// dialAll dials every address, each call carrying token (none when "").
func dialAll(t *testing.T, addrs []string, token string) []grpc.ClientConnInterface {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: true}))
	}
	var out []grpc.ClientConnInterface
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		out = append(out, cc)
	}
	return out
}

func psTables() []ps.Table {
	var ts []ps.Table
	for i := range 6 {
		tb := ps.Table{Name: fmt.Sprintf("t%d", i), Vocab: int64(40 + 17*i), Dim: 4 + 4*(i%2), Optimizer: ps.Adagrad,
			LearningRate: 0.1, InitialAccumulator: 0.1, InitScale: 0.05, InitSeed: 3}
		if i == 4 {
			tb.Optimizer, tb.InitialAccumulator = ps.SGD, 0
		}
		ts = append(ts, tb)
	}
	return ts
}

func psStep(tables []ps.Table, cores, step int) (ps.Batch, ps.Grads) {
	rng := rand.New(rand.NewPCG(uint64(step), 5))
	b, g := make(ps.Batch, cores), make(ps.Grads, cores)
	for c := range cores {
		b[c], g[c] = make([][]int64, len(tables)), make([][]float32, len(tables))
		for t, tb := range tables {
			for range 1 + rng.IntN(10) {
				b[c][t] = append(b[c][t], rng.Int64N(tb.Vocab))
				for range tb.Dim {
					g[c][t] = append(g[c][t], float32(rng.NormFloat64()))
				}
			}
		}
	}
	return b, g
}

func psRun(t *testing.T, c *ps.Client, tables []ps.Table, cores, from, to int) {
	t.Helper()
	for step := from; step <= to; step++ {
		b, g := psStep(tables, cores, step)
		f, err := c.Lookup(context.Background(), b)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := c.Apply(context.Background(), f, g); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// psRows reads every row of every table as float32 bits.
func psRows(t *testing.T, c *ps.Client, tables []ps.Table, cores int) [][]uint32 {
	t.Helper()
	b := make(ps.Batch, cores)
	for i := range b {
		b[i] = make([][]int64, len(tables))
	}
	for tb := range tables {
		for r := range tables[tb].Vocab {
			b[0][tb] = append(b[0][tb], r)
		}
	}
	f, err := c.Lookup(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]uint32, len(tables))
	for tb := range tables {
		for i := range b[0][tb] {
			for _, x := range f.Value(0, tb, i) {
				out[tb] = append(out[tb], math.Float32bits(x))
			}
		}
	}
	return out
}

// TestPSKilledRestartsFromCheckpoint runs two `trainer ps` processes,
// trains, commits a checkpoint at step 4, trains to step 6, and kills
// server 1 with SIGKILL. Restarted on the same directory and port, it is at
// step 4 and holds exactly the rows an uninterrupted in-process run has at
// step 4: no committed update is lost (and no later one survives to mix
// with them). The client sees the servers disagree, rolls both back to the
// committed step, retrains steps 5 to 8, and ends with the uninterrupted
// run's embeddings bit for bit, optimizer state included.
func TestPSKilledRestartsFromCheckpoint(t *testing.T) {
	const shards, cores = 2, 3
	ctx := context.Background()
	tables := psTables()
	dir := t.TempDir()
	tokens, toks := sigdtest.WriteTokens(t, t.TempDir())
	token := toks["trainer"]
	addrs := []string{sigdtest.FreeAddr(t), sigdtest.FreeAddr(t)}
	procs := make([]*psProcess, shards)
	for i := range shards {
		procs[i] = startPS(t, addrs[i], i, shards, dir, tokens)
	}
	cfg := ps.ClientConfig{Tables: tables, Stacking: true, Mode: ps.Coalesced, Cores: cores}
	c, err := ps.NewClient(ctx, dialAll(t, addrs, token), cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The uninterrupted run: in-process servers, uncoalesced.
	var refConns []grpc.ClientConnInterface
	for i := range shards {
		s, err := ps.NewServer(ctx, ps.Config{Shard: i, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := ps.NewGRPCServer(s, nil)
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		refConns = append(refConns, dialAll(t, []string{lis.Addr().String()}, "")...)
	}
	refCfg := cfg
	refCfg.Mode = ps.Uncoalesced
	ref, err := ps.NewClient(ctx, refConns, refCfg)
	if err != nil {
		t.Fatal(err)
	}
	psRun(t, ref, tables, cores, 1, 4)
	at4 := psRows(t, ref, tables, cores)
	psRun(t, ref, tables, cores, 5, 8)
	at8 := psRows(t, ref, tables, cores)

	psRun(t, c, tables, cores, 1, 4)
	if step, err := c.Checkpoint(ctx); err != nil || step != 4 {
		t.Fatalf("checkpoint: step %d, %v", step, err)
	}
	psRun(t, c, tables, cores, 5, 6)

	procs[1].kill()
	b, g := psStep(tables, cores, 7)
	if f, err := c.Lookup(ctx, b); err == nil {
		if err := c.Apply(ctx, f, g); err == nil {
			t.Fatal("step 7 succeeded with a server killed")
		}
	}
	procs[1] = startPS(t, addrs[1], 1, shards, dir, tokens)

	c2, err := ps.NewClient(ctx, dialAll(t, addrs, token), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c2.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].GetStep() != 6 || st[1].GetStep() != 4 {
		t.Fatalf("after the restart: server steps %d and %d, want 6 and 4", st[0].GetStep(), st[1].GetStep())
	}
	if c2.Step() != -1 {
		t.Fatalf("client step %d with servers at 6 and 4, want -1", c2.Step())
	}
	if _, err := c2.Lookup(ctx, b); err == nil {
		t.Fatal("lookup with servers at different steps succeeded")
	}

	// Server 1's rows as restarted, read directly: the run's rows at step 4.
	l := c2.Layout()
	raw := psv1.NewParameterServerClient(dialAll(t, addrs[1:], token)[0])
	checked := 0
	for tb := range tables {
		for r := range tables[tb].Vocab {
			v, gr := l.Locate(tb, r)
			if l.Server(gr) != 1 {
				continue
			}
			resp, err := raw.Lookup(ctx, &psv1.LookupRequest{Variables: []int32{int32(v)}, Counts: []uint32{1}, Rows: []int64{gr}})
			if err != nil {
				t.Fatal(err)
			}
			d := tables[tb].Dim
			for e, x := range resp.GetValues() {
				if math.Float32bits(x) != at4[tb][int(r)*d+e] {
					t.Fatalf("restarted server 1: table %s row %d differs from step 4 of the uninterrupted run", tables[tb].Name, r)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("server 1 holds no rows")
	}

	if err := c2.Restore(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if got := psRows(t, c2, tables, cores); !sameRows(got, at4) {
		t.Fatal("after Restore(4) the embeddings differ from step 4")
	}
	psRun(t, c2, tables, cores, 5, 8)
	if got := psRows(t, c2, tables, cores); !sameRows(got, at8) {
		t.Fatal("after retraining steps 5-8 the embeddings differ from the uninterrupted run")
	}
	if sameRows(at4, at8) {
		t.Fatal("steps 5-8 changed nothing")
	}
}

func sameRows(a, b [][]uint32) bool { return slices.EqualFunc(a, b, slices.Equal) }

// TestPSFlags: wrong usage exits 2 with a message.
func TestPSFlags(t *testing.T) {
	tokens, _ := sigdtest.WriteTokens(t, t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ps", "--tokens", tokens, "--shard", "0", "--shards", "1"}, "--data DIR or --s3-endpoint"},
		{[]string{"ps", "--tokens", tokens, "--data", t.TempDir(), "--shard", "2", "--shards", "2"}, "--shard 2"},
		{[]string{"ps", "--tokens", tokens, "--data", t.TempDir(), "--s3-endpoint", "127.0.0.1:9"}, "not both"},
		{[]string{"ps", "--tokens", tokens, "--s3-endpoint", "127.0.0.1:9"}, "--pipeline"},
	} {
		var out, errb strings.Builder
		if code := runMain(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, want 2 naming %q (%s)", tc.args, code, tc.want, errb.String())
		}
	}
}

// TestPSRequiresTokens: `trainer ps` without a token file does not start
// (every SIG service authenticates its callers): it exits 2 naming
// --tokens. It runs as a child process, which is killed if it serves.
func TestPSRequiresTokens(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPSHelperProcess$", "--", "ps", "--listen", "127.0.0.1:0", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "PS_TEST_HELPER=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("trainer ps without --tokens is still running: %s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), "--tokens is required") {
		t.Fatalf("trainer ps without --tokens: exit %d, want 2 naming --tokens: %s", code, stderr.String())
	}
}

// TestPSRefusesUnauthenticated: a `trainer ps` process refuses a call
// without a token and one with a token its file does not hold
// (Unauthenticated), and one of a role that does not train
// (PermissionDenied); the trainer's token is served. Status and Lookup are
// asked: the one any caller might probe, and the one that reads the tables.
func TestPSRefusesUnauthenticated(t *testing.T) {
	tokens, toks := sigdtest.WriteTokens(t, t.TempDir())
	p := startPS(t, "127.0.0.1:0", 0, 1, t.TempDir(), tokens)
	ctx := context.Background()
	call := func(token string) error {
		c := psv1.NewParameterServerClient(dialAll(t, []string{p.addr}, token)[0])
		if _, err := c.Status(ctx, &psv1.StatusRequest{}); err != nil {
			return err
		}
		_, err := c.Lookup(ctx, &psv1.LookupRequest{})
		if status.Code(err) == codes.FailedPrecondition {
			err = nil // served: the server has no tables yet
		}
		return err
	}
	for _, tc := range []struct {
		name, token string
		want        codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"a wrong token", toks["trainer"] + "-wrong", codes.Unauthenticated},
		{"a reader's token", toks["reader"], codes.PermissionDenied},
		{"the trainer's token", toks["trainer"], codes.OK},
		{"an operator's token", toks["operator"], codes.OK},
	} {
		if err := call(tc.token); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
