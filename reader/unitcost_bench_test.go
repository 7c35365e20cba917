package reader

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// unitSizes are the blocks BenchmarkUnitCost reads: a unit of sigd dev's
// default seal (--seal-after 1s, about 700 rows: bench/caughtup.txt), one
// of the fleet's 10,000-row blocks, and the other benchmarks' 100k-row
// blocks.
var unitSizes = []struct {
	name   string
	rows   int
	blocks int
}{{"rows700", 700, 16}, {"rows10k", 10_000, 4}, {"rows100k", benchRows, 2}}

// BenchmarkUnitCost measures what one unit costs a reader beyond its
// bytes (issue 28, item 3): per block size, the object store requests a
// SIG unit of ctr_small makes (every input from its memo object, the
// guard at its default), the first time a reader sees the block (a new
// Server per unit: nothing cached) and again (one Server, every unit read
// before), and the reader's CPU per example serving the same units SIG
// and LIG without gRPC (Serve, responses discarded), alternating in the
// same run; and MinIO's CPU per unit the SIG reads cost it (its process's
// utime+stime from /proc, when it is this process's child).
//
// It uses only what the package had before the read path was planned
// (issue 28), so that bench/requests.sh runs the same file at the commit
// before and at HEAD, alternately, and puts both in one table.
func BenchmarkUnitCost(b *testing.B) {
	for _, size := range unitSizes {
		f := newFixture(b, fixtureConfig{Blocks: size.blocks, RowsPerBlock: size.rows, Graphs: fleetGraphs(b, "ctr_small")})
		b.Run(size.name, func(b *testing.B) {
			benchGC(b)
			ctx := context.Background()
			serve := func(s *Server, u *readerv1.WorkUnit) int64 {
				var rows int64
				err := s.Serve(ctx, &readerv1.ReadRequest{Unit: u}, func(r *readerv1.ReadResponse) error {
					rows += r.Rows
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				return rows
			}
			units := map[readerv1.InputMode][]*readerv1.WorkUnit{}
			for _, mode := range []readerv1.InputMode{memo, local} {
				for bi := range f.blocks {
					units[mode] = append(units[mode], f.unit(bi, 4096, allMode(mode)))
				}
			}
			// Requests of a unit whose block the reader has not seen.
			var coldReqs, coldUnits int64
			for _, u := range units[memo] {
				before := f.store.Stats().Requests
				serve(f.server(b, Config{}), u)
				coldReqs += f.store.Stats().Requests - before
				coldUnits++
			}
			s := f.server(b, Config{})
			for _, u := range units[memo] { // warm up: every block seen once
				serve(s, u)
			}
			pid := minioPID(f)
			// Enough units per iteration that a small unit's run is not
			// all clock granularity: about 500k examples.
			per := max(1, 500_000/(size.rows*size.blocks))
			var sigCPU, ligCPU, minioCPU time.Duration
			var sigRows, ligRows, reqs, n int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				before, m0, c0 := f.store.Stats().Requests, procCPU(pid), cpuTime()
				for j := 0; j < per; j++ {
					for _, u := range units[memo] {
						sigRows += serve(s, u)
						n++
					}
				}
				c1 := cpuTime()
				sigCPU += c1 - c0
				minioCPU += procCPU(pid) - m0
				reqs += f.store.Stats().Requests - before
				for j := 0; j < per; j++ {
					for _, u := range units[local] {
						ligRows += serve(s, u)
					}
				}
				ligCPU += cpuTime() - c1
			}
			b.StopTimer()
			if sigRows != ligRows {
				b.Fatalf("SIG served %d rows, LIG %d", sigRows, ligRows)
			}
			b.ReportMetric(float64(coldReqs)/float64(coldUnits), "cold-req/unit")
			b.ReportMetric(float64(reqs)/float64(n), "req/unit")
			b.ReportMetric(float64(sigCPU.Nanoseconds())/float64(sigRows), "sig-cpu-ns/ex")
			b.ReportMetric(float64(ligCPU.Nanoseconds())/float64(ligRows), "lig-cpu-ns/ex")
			b.ReportMetric(ligCPU.Seconds()/sigCPU.Seconds(), "lig/sig")
			b.ReportMetric(float64(sigCPU.Microseconds())/float64(n), "sig-cpu-us/unit")
			if pid > 0 {
				b.ReportMetric(float64(minioCPU.Microseconds())/float64(n), "minio-cpu-us/unit")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// minioPID is the pid of the fixture's MinIO: the child of this process
// whose command line names its data directory; 0 if there is none.
func minioPID(f *fixture) int {
	me := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) < 2 || fields[1] != me {
			continue
		}
		cmdline, _ := os.ReadFile(d + "/cmdline")
		if bytes.Contains(cmdline, []byte(f.minio.DataDir)) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	return 0
}

// procCPU is the user and system CPU time of process pid
// (/proc/<pid>/stat, in clock ticks of 10 ms); 0 without one.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of stat, 12 and 13 after comm.
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkRangeCost measures what a ranged GET costs as a function of its
// length, to choose the coalescing limits of the read path
// (warehouse/block, fetch.go): GETs of 1 KiB to 4 MiB of one 16 MiB object
// in the fixture's MinIO, sequentially, with the CPU of this process (the
// reader's side: signing, HTTP, receiving the body) and of MinIO (its
// process, from /proc) per request. A line through the 1 KiB and the
// 4 MiB costs gives a fixed cost per request and a cost per byte; their
// ratio (hole-B) is the hole at which reading unwanted bytes costs what
// another request does, Arrow's ReadRangeCache's rule for its hole limit
// (CacheOptions::MakeFromNetworkMetrics: latency times bandwidth), with
// CPU in place of time.
func BenchmarkRangeCost(b *testing.B) {
	f := newFixture(b, fixtureConfig{})
	ctx := context.Background()
	const size = 16 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7919 + i>>13)
	}
	const key = "bench/range"
	if _, err := f.store.Put(ctx, key, data, nil); err != nil {
		b.Fatal(err)
	}
	pid := minioPID(f)
	lengths := []int{1 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}
	buf := make([]byte, 4<<20)
	const reqs = 200
	cost := func(n int) (client, server time.Duration) {
		c0, m0 := cpuTime(), procCPU(pid)
		for r := 0; r < reqs; r++ {
			off := int64(r*(n+4096)) % (size - int64(n))
			if err := f.store.GetRangeInto(ctx, key, off, buf[:n], nil); err != nil {
				b.Fatal(err)
			}
		}
		return (cpuTime() - c0) / reqs, (procCPU(pid) - m0) / reqs
	}
	cost(1 << 20) // warm up the connections and MinIO's caches
	b.ResetTimer()
	client := make([]time.Duration, len(lengths))
	server := make([]time.Duration, len(lengths))
	for i := 0; i < b.N; i++ {
		for j, n := range lengths {
			c, s := cost(n)
			client[j] += c
			server[j] += s
		}
	}
	b.StopTimer()
	for j, n := range lengths {
		b.ReportMetric(float64(client[j].Microseconds())/float64(b.N), fmt.Sprintf("client-us/%dKiB", n>>10))
		b.ReportMetric(float64(server[j].Microseconds())/float64(b.N), fmt.Sprintf("minio-us/%dKiB", n>>10))
	}
	last := len(lengths) - 1
	span := float64(lengths[last] - lengths[0])
	fit := func(c []time.Duration) (fixed, perMiB float64) {
		perB := float64(c[last]-c[0]) / float64(b.N) / span
		return float64(c[0])/float64(b.N) - perB*float64(lengths[0]), perB
	}
	cf, cb := fit(client)
	sf, sb := fit(server)
	b.ReportMetric(cf/1e3, "client-us/req")
	b.ReportMetric(cb*(1<<20)/1e3, "client-us/MiB")
	b.ReportMetric(cf/cb/(1<<10), "client-hole-KiB")
	if pid > 0 {
		b.ReportMetric(sf/1e3, "minio-us/req")
		b.ReportMetric(sb*(1<<20)/1e3, "minio-us/MiB")
		b.ReportMetric((cf+sf)/(cb+sb)/(1<<10), "hole-KiB")
	}
	b.ReportMetric(0, "ns/op")
}
