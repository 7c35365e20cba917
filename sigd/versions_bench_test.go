package sigd_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

// BenchmarkFirstVersionPass (issue 26) restarts sigd over a catalog of
// 50,000 raw blocks (SIG_BENCH_BLOCKS), one in 20 of them at version 2, and
// times the first version pass: sigd.New opens its data directory anew
// (catalog, matching cache, queues: every cache cold), then one pass of
// its versions.Manager, as Serve's would be. Sub-benchmarks:
//
//	rescan     what every first pass did before the change feed: list every
//	           block of every source (Catalog.Sources, Catalog.Blocks) and
//	           pick the versioned ones (their BlockChanged calls, which it
//	           made for all of them at every start, are not counted)
//	feed       the first pass from the position sigd stored before it
//	           stopped, nothing committed meanwhile
//	behind100  the same with 100 versions committed while sigd was down
//	           (BlockChanged for each)
//	from0      a catalog without a stored position (sigd's first start on
//	           a catalog written before the feed): every block through the
//	           feed, BlockChanged for every versioned one
//
// No pipeline is registered, so BlockChanged finds no component to make
// an entry for: the passes differ in what they read. The blocks' metadata
// is a real block's footer (1,000 Ads events) under each block's own id,
// window and Kafka range; their objects are not written (no pass reads
// them). bench/versions.sh runs it and writes bench/versions.txt.
func BenchmarkFirstVersionPass(b *testing.B) {
	n := 50_000
	if s := os.Getenv("SIG_BENCH_BLOCKS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 200 {
			b.Fatalf("SIG_BENCH_BLOCKS=%q: want a number >= 200", s)
		}
	}
	w := sigdtest.NewWarehouse(b, sigdtest.WarehouseConfig{})
	dir := b.TempDir()
	template := w.AddBlocks(b, 1)[0]
	enc, _ := json.Marshal(template)

	// Catalogue n blocks, then a version 2 of every 20th: all but the last
	// 100 versions, snapshot behind, the last 100, snapshot now.
	cat, err := catalog.Open(filepath.Join(dir, "catalog"))
	if err != nil {
		b.Fatal(err)
	}
	const partitions = 8
	hour := int64(time.Hour / time.Microsecond)
	metas := make([]block.Meta, n)
	var batch []block.Meta
	commit := func(m block.Meta) {
		if batch = append(batch, m); len(batch) == 1000 {
			if err := cat.Commit(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	flush := func() {
		if len(batch) > 0 {
			if err := cat.Commit(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for i := range metas {
		m := template.Clone()
		window := template.WindowStart + int64(i/partitions)*hour
		kr := block.KafkaRange{Topic: "raw.ads", Partition: int32(i % partitions), First: int64(i/partitions) * 1000}
		kr.Last = kr.First + 999
		m.ID, m.WindowStart, m.Kafka = block.ID(window, kr), window, &kr
		m.MinEventTime, m.MaxEventTime = window, window+hour-1
		m.Key = block.RawKey("ads", m.Ref())
		metas[i] = m
		commit(m)
	}
	flush()
	var versioned []block.Meta
	for i := 0; i < n; i += 20 {
		m := metas[i].Clone()
		m.Seq, m.Version = 0, 2
		m.Key = block.RawKey("ads", m.Ref())
		m.ColumnVersions = map[string]int64{"bid_price": 2}
		m.Changes = []block.Change{{Version: 2, Topic: "raw.ads", Partition: m.Kafka.Partition, First: m.Kafka.Last + 1,
			Last: m.Kafka.Last + 1, UpdatedRows: 1, Columns: []string{"bid_price"}}}
		versioned = append(versioned, m)
	}
	for _, m := range versioned[:len(versioned)-100] {
		commit(m)
	}
	flush()
	behind, _ := cat.Snapshot()
	for _, m := range versioned[len(versioned)-100:] {
		commit(m)
	}
	flush()
	now, _ := cat.Snapshot()
	if err := cat.Close(); err != nil {
		b.Fatal(err)
	}

	tokens, _ := sigdtest.WriteTokens(b, b.TempDir())
	cfg := sigd.Config{DataDir: dir, TokensFile: tokens, Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		S3Endpoint: w.MinIO.Endpoint, S3AccessKey: w.MinIO.AccessKey, S3SecretKey: w.MinIO.SecretKey, S3Bucket: sigdtest.Bucket,
		KafkaBrokers: w.Kafka.Brokers, RemoteWorkers: true}
	ctx := context.Background()
	// restart sets the stored position (-1: leave it), then opens sigd on
	// the data directory; the caller closes it.
	restart := func(pos int64) *sigd.Server {
		b.Helper()
		if pos >= 0 {
			cat, err := catalog.Open(filepath.Join(dir, "catalog"))
			if err != nil {
				b.Fatal(err)
			}
			if err := cat.SetPosition(versions.PositionName, pos); err != nil {
				b.Fatal(err)
			}
			if err := cat.Close(); err != nil {
				b.Fatal(err)
			}
		}
		srv, err := sigd.New(ctx, cfg, sigd.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		return srv
	}
	// The machine is shared: the process's CPU time in the timed part is
	// reported beside the wall time (it counts Pebble's and the GC's
	// threads too, and nothing else runs then).
	var cpu time.Duration
	cpuNow := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := func(b *testing.B) {
		b.StartTimer()
		cpu -= cpuNow()
	}
	stop := func(b *testing.B) {
		cpu += cpuNow()
		b.StopTimer()
	}
	report := func(b *testing.B, followed int) {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		cpu = 0
		b.ReportMetric(float64(n), "blocks")
		b.ReportMetric(float64(len(enc)), "bytes/block")
		b.ReportMetric(float64(followed), "versions/op")
	}

	b.Run("rescan", func(b *testing.B) {
		var listed, picked int
		for range b.N {
			b.StopTimer()
			srv := restart(-1)
			start(b)
			c := srv.Catalog()
			if _, err := c.Snapshot(); err != nil {
				b.Fatal(err)
			}
			sources, err := c.Sources()
			if err != nil {
				b.Fatal(err)
			}
			listed, picked = 0, 0
			for _, src := range sources {
				ms, err := c.Blocks(src)
				if err != nil {
					b.Fatal(err)
				}
				listed += len(ms)
				for _, m := range ms {
					if m.Ref().Version() >= 2 {
						picked++
					}
				}
			}
			stop(b)
			srv.Close()
		}
		if listed != n || picked != len(versioned) {
			b.Fatalf("listed %d blocks, %d versioned; want %d, %d", listed, picked, n, len(versioned))
		}
		report(b, picked)
	})
	for _, c := range []struct {
		name string
		pos  int64
		want int
	}{{"feed", now, 0}, {"behind100", behind, 100}, {"from0", 0, len(versioned)}} {
		b.Run(c.name, func(b *testing.B) {
			var followed int
			for range b.N {
				b.StopTimer()
				srv := restart(c.pos)
				start(b)
				var err error
				if followed, err = srv.Versions().Follow(ctx); err != nil {
					b.Fatal(err)
				}
				stop(b)
				pos := srv.Versions().Position()
				srv.Close()
				if followed != c.want || pos != now {
					b.Fatalf("the first pass followed %d versions and stopped at %d; want %d, at %d", followed, pos, c.want, now)
				}
			}
			report(b, followed)
		})
	}
}
