package objstore_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sigdata/sig/internal/testenv"
)

// BenchmarkWrapperVsBare puts and gets the same 16 MiB object through the
// wrapper and through bare minio-go, interleaved in the same run, and reports
// each throughput and the ratio wrapper/bare (target >= 0.9: the wrapper adds
// checksums and retries, not cost).
func BenchmarkWrapperVsBare(b *testing.B) {
	m := testenv.NewMinIO(b)
	s := newStore(b, m, nil)
	bare := bareClient(b, m)
	ctx := context.Background()
	const size = 16 << 20
	data := randBytes(size, 7)
	var wPut, bPut, wGet, bGet time.Duration

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
	wrapperGet()
	bareGet()
	wPut, bPut, wGet, bGet = 0, 0, 0, 0
	b.SetBytes(2 * size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so neither always sees a warm cache.
		if i%2 == 0 {
			wrapperPut()
			barePut()
			wrapperGet()
			bareGet()
		} else {
			barePut()
			wrapperPut()
			bareGet()
			wrapperGet()
		}
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * size / (1 << 20) / d.Seconds() }
	b.ReportMetric(mbps(wPut), "wrapper_put_MB/s")
	b.ReportMetric(mbps(bPut), "bare_put_MB/s")
	b.ReportMetric(mbps(wGet), "wrapper_get_MB/s")
	b.ReportMetric(mbps(bGet), "bare_get_MB/s")
	b.ReportMetric(bPut.Seconds()/wPut.Seconds(), "put_ratio")
	b.ReportMetric(bGet.Seconds()/wGet.Seconds(), "get_ratio")
}
