package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCommandsExitStatus(t *testing.T) {
	cs := NewCommands("prog")
	cs.Register(Command{Name: "ok", Usage: "succeeds", Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
		_, err := io.WriteString(stdout, strings.Join(args, ","))
		return err
	}})
	cs.Register(Command{Name: "fail", Usage: "fails", Run: func(context.Context, []string, io.Writer, io.Writer) error {
		return errors.New("boom")
	}})
	cs.Register(Command{Name: "flags", Usage: "parses flags", Run: func(_ context.Context, args []string, _, stderr io.Writer) error {
		fs := NewFlags("prog", "flags", stderr)
		n := fs.Int("n", 0, "a number")
		if err := ParseFlags(fs, args); err != nil {
			return err
		}
		if *n < 0 {
			return ErrUsage
		}
		return nil
	}})
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, 2, "", "usage: prog COMMAND"},
		{[]string{"help"}, 0, "", "fails"},
		{[]string{"nope"}, 2, "", `unknown command "nope"`},
		{[]string{"ok", "a", "b"}, 0, "a,b", ""},
		{[]string{"fail"}, 1, "", "prog fail: boom"},
		{[]string{"flags", "-n", "3"}, 0, "", ""},
		{[]string{"flags", "-n", "x"}, 2, "", "invalid value"},
		{[]string{"flags", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"flags", "-n", "-1"}, 2, "", "usage"},
		{[]string{"flags", "-h"}, 0, "", "a number"},
	} {
		var out, errb bytes.Buffer
		code := cs.Main(c.args, &out, &errb)
		if code != c.code || out.String() != c.stdout || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("%v: exit %d stdout %q stderr %q; want %d %q, stderr containing %q", c.args, code, out.String(), errb.String(), c.code, c.stdout, c.stderr)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	cs.Register(Command{Name: "ok"})
}

func TestParseInterspersed(t *testing.T) {
	fs := NewFlags("prog", "x", io.Discard)
	j := fs.Bool("json", false, "")
	pos, err := ParseInterspersed(fs, []string{"a", "--json", "b", "--", "--c"})
	if err != nil || !*j || strings.Join(pos, " ") != "a b --c" {
		t.Fatalf("pos %q json %v err %v", pos, *j, err)
	}
	if _, err := ParseInterspersed(NewFlags("prog", "x", io.Discard), []string{"--bogus"}); !errors.Is(err, ErrUsage) {
		t.Fatalf("unknown flag: %v", err)
	}
}

// TestCommandsDefault: a binary with a default command (sigd: serve) runs
// it when no command is named; flags of its commands are named after the
// binary and the command.
func TestCommandsDefault(t *testing.T) {
	cs := NewCommands("prog")
	cs.Default = "serve"
	cs.Register(Command{Name: "serve", Usage: "serves", Run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		fs := cs.NewFlags("serve", stderr)
		if err := ParseEnv(fs, args); err != nil {
			return err
		}
		_, err := io.WriteString(stdout, fs.Name())
		return err
	}})
	var out, errb bytes.Buffer
	if code := cs.Main(nil, &out, &errb); code != 0 || out.String() != "prog serve" {
		t.Errorf("no command: exit %d, stdout %q, stderr %q; want the default command", code, out.String(), errb.String())
	}
	out.Reset()
	if code := cs.Main([]string{"serve", "x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `prog serve: usage: unexpected arguments ["x"]`) {
		t.Errorf("serve x: exit %d, stderr %q", code, errb.String())
	}
}
