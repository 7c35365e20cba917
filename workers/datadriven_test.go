package workers

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A minimal data-driven test format, after cockroachdb/datadriven:
//
//	# comments and blank lines between cases are kept
//	command arg arg
//	----
//	expected output
//	(a blank line ends the case)
//
// go test ./workers -rewrite regenerates the expected outputs; review the
// diff before committing.

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations with actual output")

type ddCase struct {
	line     int
	pre      string // comments and blank lines before the case
	cmd      string
	expected string
}

func parseDD(t *testing.T, path string) ([]ddCase, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var cases []ddCase
	var pre strings.Builder
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre.WriteString(l + "\n")
			continue
		}
		c := ddCase{line: i + 1, pre: pre.String(), cmd: strings.TrimSpace(l)}
		pre.Reset()
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", path, c.line, c.cmd)
		}
		var exp []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			exp = append(exp, lines[i])
		}
		c.expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases, pre.String()
}

// runDD runs every case of the file through fn and compares outputs.
func runDD(t *testing.T, path string, fn func(t *testing.T, cmd string) string) {
	t.Helper()
	runDDExpect(t, path, func(t *testing.T, cmd, _ string) string { return fn(t, cmd) })
}

// runDDExpect is runDD for commands that observe a concurrent system: fn
// also gets the expected output (empty under -rewrite), so that it can
// wait for the system to reach it before answering.
func runDDExpect(t *testing.T, path string, fn func(t *testing.T, cmd, expected string) string) {
	t.Helper()
	cases, tail := parseDD(t, path)
	var out strings.Builder
	for _, c := range cases {
		exp := c.expected
		if *rewrite {
			exp = ""
		}
		got := strings.TrimRight(fn(t, c.cmd, exp), "\n")
		if !*rewrite && got != c.expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd, got, c.expected)
		}
		out.WriteString(c.pre + c.cmd + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		out.WriteString("\n") // the blank line that ends the case, which parseDD consumed
	}
	if *rewrite {
		s := out.String() + tail
		s = strings.TrimRight(s, "\n") + "\n"
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ddFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata in %s: %v", dir, err)
	}
	return files
}
