package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sigdata/sig/internal/cli"
)

func TestJobCommandsRejectBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"controller", "--client", "c", "--pipeline", "p"},
		{"controller", "--client", "c", "--pipeline", "p", "--range", "yesterday", "--s3-endpoint", "x:1"},
		{"controller", "--client", "c", "--pipeline", "p", "--range", "0:10", "--s3-endpoint", "x:1", "--mode", "warp"},
		{"host"},
		{"fleet", "--bogus"},
	} {
		var out, errb bytes.Buffer
		if code := runMain(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, code, errb.String())
		}
	}
}

// TestParseRange: a job's --range, read as the controller's event range
// (TO may be empty: the job follows the stream).
func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in       string
		from, to int64
	}{
		{"100:200", 100, 200},
		{"100:", 100, 0},
		{"2026-01-01T00:00:00Z:2026-01-01T01:00:00Z", 1767225600000000, 1767229200000000},
	} {
		from, to, err := parseRange(t, c.in)
		if err != nil || from != c.from || to != c.to {
			t.Errorf("%q: %d %d %v", c.in, from, to, err)
		}
	}
}

// parseRange parses a controller's flags with --range s and returns the
// event range of its config.
func parseRange(t *testing.T, s string) (from, to int64, err error) {
	t.Helper()
	fs := commands.NewFlags("controller", io.Discard)
	f := addJobFlags(fs)
	if err := cli.ParseEnv(fs, []string{"--client", "c", "--pipeline", "p", "--s3-endpoint", "x:1", "--range", s}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(slog.New(slog.DiscardHandler))
	return cfg.From, cfg.To, err
}

func TestFleetJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain([]string{"fleet", "--days", "3", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"table_ii", "committed_fraction", "goodput", "config"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %s", k, out.String())
		}
	}
	out.Reset()
	if code := runMain([]string{"fleet", "--days", "3"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Table II") {
		t.Fatalf("text: exit %d\n%s", code, out.String())
	}
}
