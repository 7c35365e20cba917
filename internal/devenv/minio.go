package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/warehouse/objstore"
)

// ErrNoMinIO is returned when the MinIO binary cannot be found.
var ErrNoMinIO = errors.New("bin/minio not found: run make deps")

// MinIOConfig configures StartMinIO. Zero fields take defaults.
type MinIOConfig struct {
	// Binary is the MinIO executable. Default: $SIG_MINIO_BIN, else bin/minio
	// of the repository that contains the working directory (FindMinIO).
	Binary string
	// Dir holds the server's data (Dir/data) and its log (Dir/minio.log).
	// Required.
	Dir string
	// AccessKey and SecretKey are the root credentials. Default: random.
	AccessKey, SecretKey string
	// StartTimeout bounds how long a start waits for the server to answer
	// its readiness probe. Default 30s.
	StartTimeout time.Duration
	// Port, if set, is the API port (sigd's development mode keeps one
	// endpoint across restarts). Default: a free port.
	Port int
	// RandomETags runs the server with --no-compat: a PUT's ETag is random
	// instead of the MD5 of the content. By default the server is strictly
	// S3-compatible, because the tools a user first looks at SIG's data with
	// check ETags: rclone copy fails with "md5 hash differ" and s3cmd get
	// warns on every object otherwise. SIG itself never reads an ETag (it
	// checks every object by the CRC-32C objstore stores with it), so only
	// benchmarks set this, to measure the service without MinIO's MD5 of
	// every object: a few percent of memoization throughput on a 2-CPU
	// machine where MinIO shares the CPUs (bench/sigd.txt, etag=random
	// beside etag=md5). The mode also stops the server checking a body's
	// signed SHA-256, which objstore does not send (DisableContentSha256).
	RandomETags bool
}

// MinIO is a running (or stopped) MinIO server on 127.0.0.1.
type MinIO struct {
	// Endpoint is host:port of the S3 API, e.g. "127.0.0.1:41234".
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// DataDir is the server's data directory (one drive, objects under
	// DataDir/<bucket>/<key>/).
	DataDir string
	// LogPath is the file the server's output goes to.
	LogPath string

	cfg         MinIOConfig
	consoleAddr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// FindMinIO returns the MinIO binary: $SIG_MINIO_BIN if set, else bin/minio
// in the nearest directory at or above the working directory that holds
// go.mod.
func FindMinIO() (string, error) {
	if p := os.Getenv("SIG_MINIO_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SIG_MINIO_BIN=%s: %w: %w", p, ErrNoMinIO, err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "minio")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: %w", p, ErrNoMinIO)
	}
	return p, nil
}

// RepoRoot returns the nearest directory at or above the working directory
// that contains go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("devenv: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// FreeAddr returns an address on 127.0.0.1 whose port was free a moment
// ago, for a server that is told where to listen (MinIO here, a command a
// test starts): another process may take it first, so a caller that can
// retries on a fresh one.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartMinIO starts a MinIO server on free ports of 127.0.0.1 and waits until
// it is ready. Stop it with Stop.
func StartMinIO(ctx context.Context, cfg MinIOConfig) (*MinIO, error) {
	if cfg.Dir == "" {
		return nil, errors.New("devenv: MinIOConfig.Dir is required")
	}
	if cfg.Binary == "" {
		bin, err := FindMinIO()
		if err != nil {
			return nil, err
		}
		cfg.Binary = bin
	}
	if cfg.AccessKey == "" {
		cfg.AccessKey = "sig" + randid.Hex(8)
	}
	if cfg.SecretKey == "" {
		cfg.SecretKey = randid.Hex(16)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	m := &MinIO{
		AccessKey: cfg.AccessKey,
		SecretKey: cfg.SecretKey,
		DataDir:   filepath.Join(cfg.Dir, "data"),
		LogPath:   filepath.Join(cfg.Dir, "minio.log"),
		cfg:       cfg,
	}
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		return nil, err
	}
	// Another process may take a port between FreeAddr and the server's
	// bind; try fresh ports a few times.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		api, err1 := FreeAddr()
		if cfg.Port != 0 {
			api = fmt.Sprintf("127.0.0.1:%d", cfg.Port)
		}
		console, err2 := FreeAddr()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		m.Endpoint, m.consoleAddr = api, console
		if lastErr = m.start(ctx); lastErr == nil {
			return m, nil
		}
	}
	return nil, lastErr
}

// start launches the server process on m's ports and waits for readiness.
func (m *MinIO) start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return errors.New("devenv: minio already running")
	}
	logf, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"server", m.DataDir,
		"--address", m.Endpoint, "--console-address", m.consoleAddr, "--quiet"}
	if m.cfg.RandomETags {
		args = append(args, "--no-compat")
	}
	cmd := exec.Command(m.cfg.Binary, args...)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey,
		"MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Its own process group, so a test's Ctrl-C does not race our Stop; and,
	// on Linux, killed with its parent, so a crashed sigd or test never
	// leaves a server holding the data directory.
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("devenv: start minio: %w", err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.cmd, m.done = cmd, done

	deadline := time.Now().Add(m.cfg.StartTimeout)
	url := "http://" + m.Endpoint + "/minio/health/ready"
	client := &http.Client{Timeout: time.Second}
	// Ready means this server answers with these credentials: a port
	// another process took between FreeAddr and the bind may be another
	// MinIO's, whose health check answers too (and whose keys are not
	// ours: "The Access Key Id you provided does not exist"), while this
	// one is exiting for want of the port.
	s3, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		m.killLocked()
		return fmt.Errorf("devenv: minio client: %w", err)
	}
	authenticated := func() bool {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := s3.ListBuckets(actx)
		return err == nil
	}
	for {
		select {
		case <-done:
			m.cmd, m.done = nil, nil
			return fmt.Errorf("devenv: minio exited during start: %s", m.logTail())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && authenticated() {
				select {
				case <-done: // answered by another server on the port
				default:
					return nil
				}
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			m.killLocked()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("devenv: minio not ready after %v: %s", m.cfg.StartTimeout, m.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *MinIO) logTail() string {
	b, _ := os.ReadFile(m.LogPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// Running reports whether the server process is alive.
func (m *MinIO) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

func (m *MinIO) killLocked() {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.done
	m.cmd, m.done = nil, nil
}

// Kill stops the server abruptly (SIGKILL), as a crash or an outage would.
// The data directory is kept; Restart brings the server back.
func (m *MinIO) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killLocked()
}

// Stop stops the server gracefully (SIGTERM), killing it if it has not
// exited after 10 seconds. Stopping a stopped server does nothing.
func (m *MinIO) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
		m.cmd, m.done = nil, nil
	case <-time.After(10 * time.Second):
		m.killLocked()
	}
}

// Restart starts a stopped or killed server again on the same address, data
// directory and credentials. The port may have been taken meanwhile; Restart
// retries for a few seconds before giving up.
func (m *MinIO) Restart(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = m.start(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// NewMinIO starts a MinIO server for the test and stops it when the test
// ends. A missing binary fails the test (it never skips): run make deps.
func NewMinIO(tb testing.TB) *MinIO {
	tb.Helper()
	m, err := StartMinIO(context.Background(), MinIOConfig{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("devenv: %v", err)
	}
	tb.Cleanup(func() {
		m.Stop()
		if tb.Failed() {
			tb.Logf("minio log tail:\n%s", m.logTail())
		}
	})
	return m
}

// NewStore returns a client of m for the test with cfg's bucket created:
// cfg's endpoint and credentials, when empty, are m's, and the rest
// (bucket, retries, timeouts) as given. A failure fails the test.
func (m *MinIO) NewStore(tb testing.TB, cfg objstore.Config) *objstore.Store {
	tb.Helper()
	if cfg.Endpoint == "" {
		cfg.Endpoint = m.Endpoint
	}
	if cfg.AccessKey == "" && cfg.SecretKey == "" {
		cfg.AccessKey, cfg.SecretKey = m.AccessKey, m.SecretKey
	}
	s, err := objstore.New(cfg)
	if err != nil {
		tb.Fatalf("devenv: %v", err)
	}
	if err := s.EnsureBucket(context.Background()); err != nil {
		tb.Fatalf("devenv: bucket %s: %v", cfg.Bucket, err)
	}
	return s
}
