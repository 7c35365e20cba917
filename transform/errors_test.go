package transform

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected outputs of data-driven tests in testdata/")

// A case file of testdata/errors holds one DSL error case in sections:
//
//	# what the case is about (free text before the first section)
//	-- limits --        (optional: Limits fields, one "Name value" a line)
//	MaxNodes 3
//	-- input --
//	input x = lowr(col("query"))
//	-- error --
//	1:11: unknown op "lowr" (did you mean "lower"?)
//
// The input is parsed and checked against the Ads schema with the default
// registry; the error must be exactly the expected text. go test -update
// rewrites the error sections from what the code says (then read the diff).
type caseFile struct {
	path     string
	preamble string
	sections []section
}

type section struct {
	name string
	body string
}

func readCaseFile(path string) (*caseFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cf := &caseFile{path: path}
	var cur *section
	for _, line := range strings.SplitAfter(string(b), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			cf.sections = append(cf.sections, section{name: strings.TrimSpace(trimmed[3 : len(trimmed)-3])})
			cur = &cf.sections[len(cf.sections)-1]
			continue
		}
		if cur == nil {
			cf.preamble += line
		} else {
			cur.body += line
		}
	}
	return cf, nil
}

func (cf *caseFile) get(name string) (string, bool) {
	for _, s := range cf.sections {
		if s.name == name {
			return s.body, true
		}
	}
	return "", false
}

func (cf *caseFile) set(name, body string) {
	for i := range cf.sections {
		if cf.sections[i].name == name {
			cf.sections[i].body = body
			return
		}
	}
	cf.sections = append(cf.sections, section{name: name, body: body})
}

func (cf *caseFile) bytes() []byte {
	var b bytes.Buffer
	b.WriteString(cf.preamble)
	for _, s := range cf.sections {
		fmt.Fprintf(&b, "-- %s --\n%s", s.name, s.body)
	}
	return b.Bytes()
}

// parseLimits reads "Name value" lines into Limits fields.
func parseLimits(text string) (Limits, error) {
	var lim Limits
	v := reflect.ValueOf(&lim).Elem()
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return lim, fmt.Errorf("bad limits line %q", line)
		}
		fv := v.FieldByName(f[0])
		if !fv.IsValid() {
			return lim, fmt.Errorf("no Limits field %s", f[0])
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return lim, err
		}
		fv.SetInt(int64(n))
	}
	return lim, nil
}

// checkDSL parses and checks src, turning a panic into a test failure.
func checkDSL(t *testing.T, src []byte, lim Limits) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	_, _, err = ParseAndCheck(src, "", AdsSchema(), Default(), lim)
	return err
}

func TestDSLErrors(t *testing.T) {
	paths, err := filepath.Glob("testdata/errors/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 20 {
		t.Fatalf("only %d error cases found", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cf, err := readCaseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			input, ok := cf.get("input")
			if !ok {
				t.Fatal("no input section")
			}
			var lim Limits
			if l, ok := cf.get("limits"); ok {
				if lim, err = parseLimits(l); err != nil {
					t.Fatal(err)
				}
			}
			err = checkDSL(t, []byte(input), lim)
			got := "<no error>"
			if err != nil {
				got = err.Error()
				if _, isErr := err.(*Error); !isErr {
					t.Errorf("error is a %T, want *Error", err)
				}
			}
			if *update {
				cf.set("error", got+"\n")
				if err := os.WriteFile(path, cf.bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, _ := cf.get("error")
			if got != strings.TrimRight(want, "\n") {
				t.Errorf("error:\n got: %s\nwant: %s", got, strings.TrimRight(want, "\n"))
			}
		})
	}
}
