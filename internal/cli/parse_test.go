package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestParseTimeRange: the --range FROM:TO of sigctl submit (both sides
// given) and of the trainer's jobs (open: an empty side is 0).
func TestParseTimeRange(t *testing.T) {
	for _, c := range []struct {
		in       string
		open     bool
		from, to int64
		err      string
	}{
		{"100:200", false, 100, 200, ""},
		{"100:200", true, 100, 200, ""},
		{"100:", true, 100, 0, ""},
		{":", true, 0, 0, ""},
		{"2026-01-01T00:00:00Z:2026-01-01T01:00:00Z", false, 1767225600000000, 1767229200000000, ""},
		{"2026-01-01T00:00:00Z:", true, 1767225600000000, 0, ""},
		{"100:", false, 0, 0, `"" is neither microseconds nor RFC 3339`},
		{"100", true, 0, 0, "--range wants FROM:TO"},
		{"", false, 0, 0, "--range wants FROM:TO"},
		{"2026-01-01T00:00:00+01:00:100", false, 0, 0, "write times as RFC 3339 UTC"},
		{"yesterday:today", true, 0, 0, `"yesterday" is neither`},
	} {
		from, to, err := ParseTimeRange(c.in, c.open)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrUsage) {
				t.Errorf("%q open=%v: %v, want a usage error containing %q", c.in, c.open, err, c.err)
			}
			continue
		}
		if err != nil || from != c.from || to != c.to {
			t.Errorf("%q open=%v: %d %d %v, want %d %d", c.in, c.open, from, to, err, c.from, c.to)
		}
	}
}

// TestParseEnv: flags before and after positionals, SIG_* variables for
// the flags not given, each flag's help naming its variable, and every
// error a usage error (exit status 2 under Commands).
func TestParseEnv(t *testing.T) {
	t.Setenv("SIG_TOKEN", "from-env")
	t.Setenv("SIG_SIGD", "env:1")
	var help bytes.Buffer
	fs := NewFlags("prog", "x", &help)
	c := ConnFlags(fs, "sigd", "127.0.0.1:7070", "sigd address", "bearer token")
	pos, err := ParseEnvArgs(fs, []string{"a", "--sigd", "flag:2", "b", "--tls"})
	if err != nil || strings.Join(pos, " ") != "a b" || c.Addr != "flag:2" || c.Token != "from-env" || !c.TLS {
		t.Fatalf("pos %q conn %+v err %v", pos, c, err)
	}
	fs.PrintDefaults()
	for _, want := range []string{"(env SIG_SIGD)", "(env SIG_TOKEN)", "(env SIG_TLS)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help does not say %s:\n%s", want, help.String())
		}
	}
	if err := ParseEnv(NewFlags("prog", "x", io.Discard), []string{"a", "b"}); !errors.Is(err, ErrUsage) ||
		!strings.Contains(err.Error(), `unexpected arguments ["a" "b"]`) {
		t.Errorf("positionals: %v", err)
	}
	t.Setenv("SIG_N", "many")
	fs = NewFlags("prog", "x", io.Discard)
	fs.Int("n", 0, "")
	if err := ParseEnv(fs, nil); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "SIG_N") {
		t.Errorf("bad variable: %v", err)
	}
}

func TestLogFlag(t *testing.T) {
	fs := NewFlags("prog", "x", io.Discard)
	logger := LogFlag(fs)
	if err := ParseEnv(fs, []string{"--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	l, err := logger(&out)
	if err != nil || l.Enabled(context.Background(), slog.LevelInfo) || !l.Enabled(context.Background(), slog.LevelWarn) {
		t.Fatalf("logger %v err %v", l, err)
	}
	fs = NewFlags("prog", "x", io.Discard)
	logger = LogFlag(fs)
	_ = ParseEnv(fs, []string{"--log-level", "loud"})
	if _, err := logger(&out); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `--log-level "loud"`) {
		t.Fatalf("bad level: %v", err)
	}
}
