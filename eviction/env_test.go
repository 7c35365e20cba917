package eviction_test

import (
	"testing"

	"github.com/sigdata/sig/sigd/evictiontest"
)

// env is the suite's environment (evictiontest, shared with the web UI's
// tests), with the methods this package's tests add to it (race_test.go,
// reader_test.go).
type env struct{ *evictiontest.Env }

func newEnv(tb testing.TB, cfg evictiontest.Config) *env {
	tb.Helper()
	return &env{evictiontest.New(tb, cfg)}
}
