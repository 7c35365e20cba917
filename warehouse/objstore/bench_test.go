package objstore_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sigdata/sig/internal/devenv"
)

// BenchmarkWrapperVsBare puts and gets the same 16 MiB object through the
// wrapper and through bare minio-go, interleaved in the same run, and reports
// each throughput (median over iterations) and the median per-iteration
// ratio of wrapper throughput to bare throughput (target >= 0.9: the wrapper
// adds checksums and retries, not cost).
//
// Bare PUTs are minio-go's PutObject as a user calls it (over plain HTTP it
// signs a SHA-256 of the body); the wrapper sends an unsigned payload and
// protects the bytes with its CRC-32C instead. A third PUT, bare and
// unsigned (no checksum of the body at all), gives put_ratio_unsigned: what
// the wrapper's CRC pass over the 16 MiB costs.
func BenchmarkWrapperVsBare(b *testing.B) {
	m := benchMinIO(b)
	s := newStore(b, m, nil)
	bare := bareClient(b, m)
	ctx := context.Background()
	const size = 16 << 20
	data := randBytes(size, 7)
	var wPut, bPut, uPut, wGet, bGet time.Duration
	// Per-iteration durations: the ratios are medians of per-iteration
	// ratios, so a burst of load from elsewhere on the machine during one
	// operation does not decide the result.
	var putRatios, uputRatios, getRatios, wPuts, bPuts, uPuts, wGets, bGets []float64

	wrapperPut := func() {
		t0 := time.Now()
		if _, err := s.Put(ctx, "bench/w", data, nil); err != nil {
			b.Fatal(err)
		}
		wPut += time.Since(t0)
	}
	barePut := func() {
		t0 := time.Now()
		if _, err := bare.PutObject(ctx, "test", "bench/b", bytes.NewReader(data), size, minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
			b.Fatal(err)
		}
		bPut += time.Since(t0)
	}
	bareUnsignedPut := func() {
		t0 := time.Now()
		if _, err := bare.PutObject(ctx, "test", "bench/u", bytes.NewReader(data), size,
			minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true}); err != nil {
			b.Fatal(err)
		}
		uPut += time.Since(t0)
	}
	wrapperGet := func() {
		t0 := time.Now()
		got, _, err := s.Get(ctx, "bench/w")
		if err != nil || len(got) != size {
			b.Fatal(err)
		}
		wGet += time.Since(t0)
	}
	bareGet := func() {
		t0 := time.Now()
		obj, err := bare.GetObject(ctx, "test", "bench/b", minio.GetObjectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		oi, err := obj.Stat()
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, oi.Size)
		if _, err := io.ReadFull(obj, buf); err != nil {
			b.Fatal(err)
		}
		obj.Close()
		bGet += time.Since(t0)
	}
	// Warm up connections and MinIO's caches on both paths.
	wrapperPut()
	barePut()
	bareUnsignedPut()
	wrapperGet()
	bareGet()
	wPut, bPut, uPut, wGet, bGet = 0, 0, 0, 0, 0
	b.SetBytes(5 * size) // an iteration moves the object 5 times: 3 PUTs, 2 GETs
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w0, b0, u0, w1, b1 := wPut, bPut, uPut, wGet, bGet
		// Alternate which goes first, so neither always sees a warm cache.
		if i%2 == 0 {
			wrapperPut()
			barePut()
			bareUnsignedPut()
			wrapperGet()
			bareGet()
		} else {
			bareUnsignedPut()
			barePut()
			wrapperPut()
			bareGet()
			wrapperGet()
		}
		wPuts = append(wPuts, (wPut - w0).Seconds())
		bPuts = append(bPuts, (bPut - b0).Seconds())
		uPuts = append(uPuts, (uPut - u0).Seconds())
		wGets = append(wGets, (wGet - w1).Seconds())
		bGets = append(bGets, (bGet - b1).Seconds())
		putRatios = append(putRatios, (bPut-b0).Seconds()/(wPut-w0).Seconds())
		uputRatios = append(uputRatios, (uPut-u0).Seconds()/(wPut-w0).Seconds())
		getRatios = append(getRatios, (bGet-b1).Seconds()/(wGet-w1).Seconds())
	}
	mbps := func(secs []float64) float64 { return size / (1 << 20) / median(secs) }
	b.ReportMetric(mbps(wPuts), "wrapper_put_MB/s")
	b.ReportMetric(mbps(bPuts), "bare_put_MB/s")
	b.ReportMetric(mbps(uPuts), "bare_unsigned_put_MB/s")
	b.ReportMetric(mbps(wGets), "wrapper_get_MB/s")
	b.ReportMetric(mbps(bGets), "bare_get_MB/s")
	b.ReportMetric(median(putRatios), "put_ratio")
	b.ReportMetric(median(uputRatios), "put_ratio_unsigned")
	b.ReportMetric(median(getRatios), "get_ratio")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchMinIO starts MinIO with its data in memory (/dev/shm) when available:
// the comparison is about client-side cost, and a shared disk's latency
// spikes would otherwise decide it.
func benchMinIO(b *testing.B) *devenv.MinIO {
	dir, err := os.MkdirTemp("/dev/shm", "sig-bench-minio")
	if err != nil {
		return devenv.NewMinIO(b)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	m, err := devenv.StartMinIO(context.Background(), devenv.MinIOConfig{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Stop)
	return m
}
