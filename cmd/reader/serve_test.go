package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/sigd/sigdtest"
	"github.com/sigdata/sig/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for the reader's writes and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startReader runs the reader command in this process against m, with the
// sigdtest token file and extra flags, and waits for its output to match
// ready; it returns the submatches. The reader stops when the test ends.
func startReader(t *testing.T, m *testenv.MinIO, ready *regexp.Regexp, extra ...string) []string {
	t.Helper()
	tokens, _ := sigdtest.WriteTokens(t, t.TempDir())
	args := append([]string{"--listen", "127.0.0.1:0", "--s3-endpoint", m.Endpoint, "--s3-access-key", m.AccessKey,
		"--s3-secret-key", m.SecretKey, "--s3-bucket", "sig", "--tokens", tokens, "--log-level", "warn"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reader: %v\n%s", err, stderr.String())
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		if m := ready.FindStringSubmatch(stdout.String()); m != nil {
			return m
		}
		select {
		case err := <-done:
			t.Fatalf("reader exited: %v\n%s", err, stderr.String())
		case <-deadline:
			t.Fatalf("reader output %q does not match %s", stdout.String(), ready)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var listeningLine = regexp.MustCompile(`listening on (\S+)\n`)

// TestReaderHealthAndReflection: grpcurl lists the reader's services
// through reflection, without a token, and health answers SERVING for each
// (sig.reader.v1.Reader answered NotFound, and reflection was not served).
func TestReaderHealthAndReflection(t *testing.T) {
	addr := startReader(t, testenv.NewMinIO(t), listeningLine)[1]
	services := sigdtest.CheckHealth(t, addr)
	if !slices.Contains(services, "sig.reader.v1.Reader") {
		t.Fatalf("grpcurl lists %v, not sig.reader.v1.Reader", services)
	}
}
