package cli

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// EnvName is the environment variable of a flag: SIG_ and the flag name in
// upper case with '-' as '_' (--s3-endpoint reads SIG_S3_ENDPOINT).
func EnvName(flagName string) string {
	return "SIG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyEnv sets every flag of fs that was not given on the command line from
// its environment variable, if set. Call it after fs.Parse.
func ApplyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", EnvName(f.Name), v, e)
			}
		}
	})
	return err
}

// UsageWithEnv appends each flag's environment variable to its usage text.
func UsageWithEnv(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage += " (env " + EnvName(f.Name) + ")"
	})
}

// List is a comma-separated list flag.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Set parses a comma-separated value (replacing any previous value).
func (l *List) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// RuntimeFlags adds --gc-percent and --memory-limit to fs and returns a
// function that applies them after parsing. GOGC and GOMEMLIMIT, when set,
// win, as they do for any Go program.
func RuntimeFlags(fs *flag.FlagSet, defaultGCPercent int) (apply func()) {
	gc := fs.Int("gc-percent", defaultGCPercent, "garbage collector target percentage (ignored when GOGC is set)")
	mem := fs.Int64("memory-limit", 0, "soft memory limit in bytes for the Go runtime (0: none; GOMEMLIMIT overrides it)")
	return func() {
		if _, ok := os.LookupEnv("GOGC"); !ok {
			debug.SetGCPercent(*gc)
		}
		if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok && *mem > 0 {
			debug.SetMemoryLimit(*mem)
		}
	}
}
