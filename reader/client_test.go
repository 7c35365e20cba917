package reader

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/devenv"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// Tokens of the tests' token file.
const (
	trainerToken  = "trainer-ctr-0123456789"
	otherToken    = "trainer-cvr-0123456789"
	clientToken   = "client-ctr-0123456789a"
	operatorToken = "operator-0123456789abc"
)

func writeTokens(t testing.TB) (string, *auth.Tokens) {
	t.Helper()
	entries := []auth.Entry{
		{Token: trainerToken, Principal: auth.Principal{Name: "trainer-ctr", Role: auth.RoleTrainer, Client: "ctr"}},
		{Token: otherToken, Principal: auth.Principal{Name: "trainer-cvr", Role: auth.RoleTrainer, Client: "cvr"}},
		{Token: clientToken, Principal: auth.Principal{Name: "ctr-team", Role: auth.RoleClient, Client: "ctr"}},
		{Token: operatorToken, Principal: auth.Principal{Name: "alice", Role: auth.RoleOperator}},
	}
	b, err := json.Marshal(auth.File{Tokens: entries})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.New(entries)
	if err != nil {
		t.Fatal(err)
	}
	return path, toks
}

// serveGRPC serves s on a loopback port until the test ends.
func serveGRPC(t testing.TB, s *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.GRPCServer()
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func newClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAll reads a unit through the client and returns its batches' bytes.
func readAll(ctx context.Context, c *Client, u *readerv1.WorkUnit) ([][]byte, error) {
	var out [][]byte
	for b, err := range c.ReadBatches(ctx, u) {
		if err != nil {
			return out, err
		}
		out = append(out, b.IPC)
	}
	return out, nil
}

func batchBytes(resps []*readerv1.ReadResponse) [][]byte {
	var out [][]byte
	for _, r := range resps {
		if r.Summary == nil {
			out = append(out, r.ArrowIpc)
		}
	}
	return out
}

func sameBytes(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	for i := range got {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("%s: batch %d differs", what, i)
		}
	}
}

// TestAuthAndRequestLimits: only trainers of the unit's client and operators
// may Read; a request over the size limit is refused.
func TestAuthAndRequestLimits(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 300, Graphs: fleetGraphs(t, "ctr_small")})
	_, toks := writeTokens(t)
	addr := serveGRPC(t, f.server(t, Config{Tokens: toks, MaxRequestBytes: 64 << 10}))
	ctx := context.Background()
	want, err := collect(ctx, f.server(t, Config{}), &readerv1.ReadRequest{Unit: f.unit(0, 100, nil)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		code  codes.Code
	}{
		{"", codes.Unauthenticated},
		{"not-a-token-0123456789", codes.Unauthenticated},
		{clientToken, codes.PermissionDenied},
		{otherToken, codes.PermissionDenied},
		{trainerToken, codes.OK},
		{operatorToken, codes.OK},
	} {
		c := newClient(t, ClientConfig{Addresses: []string{addr}, Token: tc.token})
		got, err := readAll(ctx, c, f.unit(0, 100, nil))
		if status.Code(err) != tc.code {
			t.Fatalf("token %q: %v, want %v", tc.token, err, tc.code)
		}
		if err == nil {
			sameBytes(t, "token "+tc.token, got, batchBytes(want))
		}
		if st := c.Stats(); st.Attempts != 1 {
			t.Fatalf("token %q: %d attempts; refusals must not be retried", tc.token, st.Attempts)
		}
	}
	big := f.unit(0, 100, nil)
	big.Inputs[0].CanonicalDsl += "\n#" + strings.Repeat("x", 100<<10)
	c := newClient(t, ClientConfig{Addresses: []string{addr}, Token: trainerToken})
	if _, err := readAll(ctx, c, big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: %v, want ResourceExhausted", err)
	}
}

// TestClientSkipsUnreachableReader: a unit whose first reader is down is
// served by the next one.
func TestClientSkipsUnreachableReader(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 300, Graphs: fleetGraphs(t, "ctr_small")})
	live := serveGRPC(t, f.server(t, Config{}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	c := newClient(t, ClientConfig{Addresses: []string{dead, live}, InitialBackoff: time.Millisecond})
	ctx := context.Background()
	got, err := readAll(ctx, c, f.unit(0, 100, nil))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := collect(ctx, f.server(t, Config{}), &readerv1.ReadRequest{Unit: f.unit(0, 100, nil)})
	sameBytes(t, "via the second reader", got, batchBytes(want))
	if st := c.Stats(); st.Retries != 1 || st.Resumes != 0 {
		t.Fatalf("stats %+v, want one retry and no resume", st)
	}
}

// TestClientMemoPending: by default a pending memo is returned at once
// (the host places a transient hold); with RetryPending the client retries
// until the memo object appears, then delivers the same bytes.
func TestClientMemoPending(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 300, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	addr := serveGRPC(t, s)
	ctx := context.Background()
	want, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 100, nil)})
	if err != nil {
		t.Fatal(err)
	}
	key := f.unit(0, 100, nil).Inputs[2].MemoObject
	if err := f.store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ClientConfig{Addresses: []string{addr}})
	_, err = readAll(ctx, c, f.unit(0, 100, nil))
	if !IsMemoPending(err) || status.Code(err) != codes.Unavailable || c.Stats().Attempts != 1 {
		t.Fatalf("%v after %d attempts, want one attempt and memo pending", err, c.Stats().Attempts)
	}

	c = newClient(t, ClientConfig{Addresses: []string{addr}, RetryPending: true, MaxAttempts: 1000,
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	type result struct {
		got [][]byte
		err error
	}
	done := make(chan result, 1)
	pendingBefore := s.Stats().MemoPending
	go func() {
		got, err := readAll(ctx, c, f.unit(0, 100, nil))
		done <- result{got, err}
	}()
	// Once the client has been told "pending", the worker finishes the task.
	deadline := time.Now().Add(time.Minute)
	for s.Stats().MemoPending == pendingBefore {
		if time.Now().After(deadline) {
			t.Fatal("the client never asked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.memoize(ctx, 0, f.inputs[2], ""); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	sameBytes(t, "after the memo appeared", r.got, batchBytes(want))
	if c.Stats().Retries == 0 {
		t.Fatal("no retry counted")
	}
}

var (
	buildOnce sync.Once
	readerBin string
	buildErr  error
)

// buildReader builds cmd/reader once per test binary.
func buildReader(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sig-reader-bin")
		if err != nil {
			buildErr = err
			return
		}
		readerBin = filepath.Join(dir, "reader")
		out, err := exec.Command("go", "build", "-o", readerBin, "github.com/sigdata/sig/cmd/reader").CombinedOutput()
		if err != nil {
			buildErr = err
			readerBin = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building cmd/reader: %v\n%s", buildErr, readerBin)
	}
	return readerBin
}

// readerProc is a cmd/reader subprocess.
type readerProc struct {
	cmd  *exec.Cmd
	addr string
}

// startReader starts cmd/reader against the MinIO, configured from SIG_*
// environment variables (and --listen from the command line).
func startReader(t testing.TB, m *devenv.MinIO, tokens string) *readerProc {
	t.Helper()
	cmd := exec.Command(buildReader(t), "--listen", "127.0.0.1:0", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "SIG_S3_ENDPOINT="+m.Endpoint, "SIG_S3_ACCESS_KEY="+m.AccessKey,
		"SIG_S3_SECRET_KEY="+m.SecretKey, "SIG_S3_BUCKET=sig", "SIG_TOKENS="+tokens)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &readerProc{cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("reader printed %q (%v), want \"listening on ADDR\"", line, err)
	}
	p.addr = addr
	return p
}

// TestReaderKilledMidStream kills the reader serving a unit (SIGKILL, a real
// cmd/reader process) after a few batches; the client finishes the unit on
// another reader from the next row, and the unit's batches are exactly those
// of an uninterrupted read.
func TestReaderKilledMidStream(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 20000, Graphs: fleetGraphs(t, "ctr_small", "cvr")})
	tokens, _ := writeTokens(t)
	a := startReader(t, f.minio, tokens)
	b := startReader(t, f.minio, tokens)
	ctx := context.Background()
	// Half the inputs memoized, half computed: both kinds of work resume.
	u := f.unit(0, 200, func(i int) readerv1.InputMode {
		if i%2 == 0 {
			return local
		}
		return memo
	})
	want, err := collect(ctx, f.server(t, Config{}), &readerv1.ReadRequest{Unit: u})
	if err != nil {
		t.Fatal(err)
	}
	// Small flow-control windows keep the server at most ~128 KiB ahead of
	// the consumer, so the kill lands mid-stream (the unit is ~2 MB).
	c := newClient(t, ClientConfig{Addresses: []string{a.addr, b.addr}, Token: trainerToken,
		DialOptions: []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}})
	var got [][]byte
	next := int64(0)
	for batch, err := range c.ReadBatches(ctx, u) {
		if err != nil {
			t.Fatalf("after %d batches: %v", len(got), err)
		}
		if batch.StartRow != next {
			t.Fatalf("batch at row %d, want %d", batch.StartRow, next)
		}
		next += batch.Record.NumRows()
		got = append(got, batch.IPC)
		if len(got) == 5 {
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_, _ = a.cmd.Process.Wait()
		}
	}
	sameBytes(t, "killed and resumed", got, batchBytes(want))
	if st := c.Stats(); st.Resumes < 1 {
		t.Fatalf("stats %+v: the kill did not interrupt the stream", st)
	}
	// With one address dead, the next unit is still served.
	if _, err := readAll(ctx, c, f.unit(0, 5000, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestSIGAndLIGIdenticalOverGRPC: through a gRPC server and the Client, SIG,
// LIG and mixed reads of a unit deliver the same bytes and the same records.
func TestSIGAndLIGIdenticalOverGRPC(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 3000, Nulls: true, Graphs: fleetGraphs(t, "ctr_wide", "ranking")})
	addr := serveGRPC(t, f.server(t, Config{}))
	c := newClient(t, ClientConfig{Addresses: []string{addr}})
	ctx := context.Background()
	modes := map[string]func(int) readerv1.InputMode{
		"SIG": allMode(memo), "LIG": allMode(local),
		"mixed": func(i int) readerv1.InputMode { return []readerv1.InputMode{memo, local}[i%2] },
	}
	got := map[string][][]byte{}
	for name, m := range modes {
		var rows int64
		for rec, err := range c.Read(ctx, f.unit(0, 1000, m)) {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			rows += rec.NumRows()
		}
		if rows != 3000 {
			t.Fatalf("%s: %d rows, want 3000", name, rows)
		}
		b, err := readAll(ctx, c, f.unit(0, 1000, m))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = b
	}
	sameBytes(t, "LIG vs SIG", got["LIG"], got["SIG"])
	sameBytes(t, "mixed vs SIG", got["mixed"], got["SIG"])
}
