package transform

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The files of testdata/errors are github.com/cockroachdb/datadriven
// scripts, one DSL error case a file:
//
//	# what the case is about
//	check [MaxNodes=3 ...]     (Limits fields to set, if any)
//	input x = lowr(col("query"))
//	----
//	1:11: unknown op "lowr" (did you mean "lower"?)
//
// The input is parsed and checked against the Ads schema with the default
// registry; the error must be exactly the expected text. go test -rewrite
// rewrites the expected errors from what the code says (then read the diff).

// dslInput is a case's DSL text. datadriven trims the input; the text is
// its lines, each ended by a newline as in the file.
func dslInput(td *datadriven.TestData) []byte {
	if td.Input == "" {
		return []byte("")
	}
	return []byte(td.Input + "\n")
}

// parseLimits reads Name=value arguments into Limits fields.
func parseLimits(args []datadriven.CmdArg) (Limits, error) {
	var lim Limits
	v := reflect.ValueOf(&lim).Elem()
	for _, a := range args {
		if len(a.Vals) != 1 {
			return lim, fmt.Errorf("bad limit %q, want Name=value", a)
		}
		fv := v.FieldByName(a.Key)
		if !fv.IsValid() {
			return lim, fmt.Errorf("no Limits field %s", a.Key)
		}
		n, err := strconv.Atoi(a.Vals[0])
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
	datadriven.Walk(t, "testdata/errors", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "check" {
				td.Fatalf(t, "unknown command %q", td.Cmd)
			}
			lim, err := parseLimits(td.CmdArgs)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			err = checkDSL(t, dslInput(td), lim)
			if err == nil {
				return "<no error>"
			}
			if _, isErr := err.(*Error); !isErr {
				t.Errorf("error is a %T, want *Error", err)
			}
			return err.Error()
		})
	})
}
