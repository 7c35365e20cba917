package workers

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// BuildID names the build of the running binary, as workers tell the queue
// when they lease (Queue.LeaseAs, LeaseTaskRequest.build): the VCS
// revision it was built from (12 hex digits, "+dirty" when the tree had
// changes; "unknown" without VCS stamping, as with -buildvcs=false or in
// test binaries), the Go version, the target the kernels were compiled
// for (GOOS/GOARCH and its level, GOAMD64 and the like), and the first 12
// hex digits of the SHA-256 of the executable itself. Those decide the
// values a worker computes, bit for bit: readers must be built as workers
// are to agree with them (package reader, "The shared-fate guard"), and a
// misbuilt binary computes the same wrong values every time, so sigd bans
// a build whose output it found wrong twice (issue 27; Queue.BanBuild)
// rather than a worker, which another worker of the same build would
// replace. The executable's hash tells apart binaries the rest does not (a
// misbuild is often the same revision built otherwise: other flags, tags,
// a broken toolchain or library), and Go's reproducible builds give the
// same bytes, so the same ID, for the same build made twice. Computed
// once.
func BuildID() string {
	buildOnce.Do(func() { buildID = readBuildID() })
	return buildID
}

var (
	buildOnce sync.Once
	buildID   string
)

func readBuildID() string {
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
			case s.Key == "GO"+strings.ToUpper(runtime.GOARCH):
				level = " " + s.Value // GOAMD64=v3, GOARM64=v8.0, ...
			}
		}
	}
	return rev + dirty + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH + level + " exe:" + executableHash()
}

// executableHash is the first 12 hex digits of the SHA-256 of the running
// executable, "unknown" when it cannot be read.
func executableHash() string {
	path, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
