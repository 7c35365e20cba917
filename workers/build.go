package workers

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// BuildID names the build of the running binary, as workers tell the queue
// when they lease (Queue.LeaseAs, LeaseTaskRequest.build): the VCS
// revision it was built from (12 hex digits, "+dirty" when the tree had
// changes; "unknown" without VCS stamping, as in test binaries), the Go
// version, and the target the kernels were compiled for (GOOS/GOARCH and
// its level, GOAMD64 and the like). Those decide the values a worker
// computes, bit for bit: readers must be built as workers are to agree
// with them (package reader, "The shared-fate guard"), and a misbuilt
// binary computes the same wrong values every time, so sigd bans a build
// whose output it found wrong (issue 27; Queue.BanBuild) rather than a
// worker, which another worker of the same build would replace.
func BuildID() string {
	rev, dirty, level := "unknown", "", ""
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && s.Value != "":
				rev = s.Value[:min(12, len(s.Value))]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			case strings.HasPrefix(s.Key, "GO") && s.Key == "GO"+strings.ToUpper(runtime.GOARCH):
				level = " " + s.Value // GOAMD64=v3, GOARM64=v8.0, ...
			}
		}
	}
	return rev + dirty + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH + level
}
