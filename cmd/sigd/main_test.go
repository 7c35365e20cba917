package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sigdata/sig/internal/devenv"
)

// startDev runs `sigd dev` in this process on free ports and returns its
// startup line's fields and its stderr; the server stops when the test
// ends.
func startDev(t *testing.T, dataDir string, extra ...string) (map[string]string, *devenv.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &devenv.SyncBuffer{}
	done := make(chan struct{})
	var runErr error
	args := append([]string{"--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, extra...)
	go func() { runErr = serve(ctx, args, stderr, true); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if runErr != nil && !t.Failed() {
			t.Errorf("sigd dev: %v", runErr)
		}
	})
	line := regexp.MustCompile(`(?m)^sigd: listening (.*)$`)
	field := regexp.MustCompile(`(\S+)=(\S+)`)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if m := line.FindStringSubmatch(stderr.String()); m != nil {
			out := map[string]string{}
			for _, f := range field.FindAllStringSubmatch(m[1], -1) {
				out[f[1]] = f[2]
			}
			return out, stderr
		}
		select {
		case <-done:
			t.Fatalf("sigd dev exited before serving: %v\n%s", runErr, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("no startup line within a minute:\n%s", stderr.String())
	return nil, nil
}

// TestDevStartupNamesCredentials: the development store's keys exist only
// in DATA_DIR/dev.json, so the startup line names that file, and the keys
// in it let a standard S3 client (minio-go here; the README shows the AWS
// CLI, rclone and s3cmd) list the bucket.
func TestDevStartupNamesCredentials(t *testing.T) {
	dir := t.TempDir()
	fields, stderr := startDev(t, dir)
	want := filepath.Join(dir, "dev.json")
	if got := fields["s3-credentials"]; got != want {
		t.Fatalf("startup line names s3-credentials=%q, want %q:\n%s", got, want, stderr.String())
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Endpoint  string `json:"s3_endpoint"`
		AccessKey string `json:"s3_access_key"`
		SecretKey string `json:"s3_secret_key"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	if st.Endpoint != fields["s3"] {
		t.Fatalf("%s names endpoint %q, the startup line %q", want, st.Endpoint, fields["s3"])
	}
	cl, err := minio.New(st.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(st.AccessKey, st.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	buckets, err := cl.ListBuckets(context.Background())
	if err != nil {
		t.Fatalf("listing buckets with the keys of %s: %v", want, err)
	}
	if !slices.ContainsFunc(buckets, func(b minio.BucketInfo) bool { return b.Name == "sig" }) {
		t.Fatalf("buckets %v, want sig", buckets)
	}
}
