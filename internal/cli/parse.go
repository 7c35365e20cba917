package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// ParseEnv parses a command's flags, then sets every flag not given on the
// command line from its SIG_* environment variable (ApplyEnv); each flag's
// usage names its variable. Flags may come before or after positional
// arguments; ParseEnv refuses any. Errors are usage errors (ErrUsage), a bad
// variable named.
func ParseEnv(fs *flag.FlagSet, args []string) error {
	pos, err := ParseEnvArgs(fs, args)
	if err != nil {
		return err
	}
	return NoArgs(pos)
}

// NoArgs is the usage error of a command that takes no positional
// arguments and was given some: a stray word is refused, not ignored.
func NoArgs(pos []string) error {
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", ErrUsage, pos)
	}
	return nil
}

// ParseEnvArgs is ParseEnv for a command that takes positional arguments:
// it returns them.
func ParseEnvArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	UsageWithEnv(fs)
	pos, err := ParseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if err := ApplyEnv(fs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return pos, nil
}

// LogFlag adds --log-level to fs and returns the function that, after
// parsing, makes the command's logger: text lines to w.
func LogFlag(fs *flag.FlagSet) func(w io.Writer) (*slog.Logger, error) {
	level := fs.String("log-level", "info", "debug, info, warn or error")
	return func(w io.Writer) (*slog.Logger, error) {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*level)); err != nil {
			return nil, fmt.Errorf("%w: --log-level %q: %v", ErrUsage, *level, err)
		}
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
	}
}

// ParseTimeRange reads a --range flag's FROM:TO: each side microseconds since
// the epoch or an RFC 3339 UTC time (RFC 3339 times hold ':' themselves: the
// two are split at "Z:"). With open, a side may be empty and reads as 0 (a
// job that follows the stream has no end); otherwise an empty side is
// refused like any other that is neither.
func ParseTimeRange(s string, open bool) (from, to int64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if strings.Count(s, ":") > 1 {
		i := strings.Index(s, "Z:")
		if i < 0 {
			return 0, 0, fmt.Errorf("%w: --range %q: write times as RFC 3339 UTC (…Z:…Z) or microseconds", ErrUsage, s)
		}
		a, b = s[:i+1], s[i+2:]
	}
	if !ok {
		return 0, 0, fmt.Errorf("%w: --range wants FROM:TO", ErrUsage)
	}
	parse := func(v string) (int64, error) {
		if v == "" && open {
			return 0, nil
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, fmt.Errorf("%w: --range: %q is neither microseconds nor RFC 3339", ErrUsage, v)
		}
		return t.UnixMicro(), nil
	}
	if from, err = parse(a); err != nil {
		return 0, 0, err
	}
	if to, err = parse(b); err != nil {
		return 0, 0, err
	}
	return from, to, nil
}
