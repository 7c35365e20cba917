package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadConfiguration: a reader never starts without a token
// file (it would serve anyone) or an object store, nor with bad values.
func TestRunRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tokens": [{"token": "short", "role": "trainer", "client": "c"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"tokens": [{"token": "0123456789abcdef", "role": "trainer", "client": "c"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--tokens", bad}, nil, "--s3-endpoint is required"},
		{[]string{"--s3-endpoint", "127.0.0.1:1"}, nil, "--tokens is required"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", bad}, nil, "at least 16 characters"},
		{nil, map[string]string{"SIG_S3_ENDPOINT": "127.0.0.1:1", "SIG_TOKENS": filepath.Join(dir, "none.json")}, "none.json"},
		{[]string{"--log-level", "loud", "--s3-endpoint", "x", "--tokens", bad}, nil, "--log-level"},
		{[]string{"extra"}, nil, "unexpected arguments"},
		{nil, map[string]string{"SIG_MAX_UNITS": "many"}, "SIG_MAX_UNITS"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", good, "--sigd", "127.0.0.1:1"}, nil, "--sigd needs --sigd-token"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", good, "--guard-sample-rows", "-1"}, nil, "--guard-sample-rows"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", good, "--read-tail", "100"}, nil, "--read-tail"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", good, "--read-hole-limit", "-1"}, nil, "--read-hole-limit"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", good, "--guard-every", "0"}, nil, "--guard-every"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--tokens", good, "--guard-on-error", "ignore"}, nil, "--guard-on-error"},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %v env %v: %v, want an error about %q", tc.args, tc.env, err, tc.want)
		}
		if strings.Contains(out.String(), "listening") {
			t.Errorf("args %v: started listening", tc.args)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}
