package block_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
)

// adsBlock writes one block of n generated Ads events and returns its meta.
func adsBlock(b *testing.B, n int) (block.Meta, func(context.Context, []string) (arrow.Record, int64, time.Duration), func(context.Context) (int64, time.Duration)) {
	_, s := newStore(b)
	ctx := context.Background()
	recs := gen.New(gen.Config{Seed: 1, EventsPerSecond: 1000}).Records(n, n)
	rec := recs[0]
	defer rec.Release()
	kr := block.KafkaRange{Topic: "raw.ads", Partition: 0, First: 0, Last: int64(n - 1)}
	id := block.ID(1767225600000000, kr)
	meta, err := block.Write(ctx, s, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
		WindowStart: 1767225600000000, WindowLength: 3600e6, SchemaFingerprint: transform.AdsSchema().Fingerprint(), Kafka: &kr}, rec)
	if err != nil {
		b.Fatal(err)
	}
	cols := func(ctx context.Context, names []string) (arrow.Record, int64, time.Duration) {
		before := s.Stats().BytesRead
		t0 := time.Now()
		r, err := block.ReadColumns(ctx, s, meta, names)
		if err != nil {
			b.Fatal(err)
		}
		return r, s.Stats().BytesRead - before, time.Since(t0)
	}
	full := func(ctx context.Context) (int64, time.Duration) {
		before := s.Stats().BytesRead
		t0 := time.Now()
		_, r, err := block.ReadBlock(ctx, s, meta.Key)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		r.Release()
		return s.Stats().BytesRead - before, d
	}
	return meta, cols, full
}

// BenchmarkReadOneColumn reads a 100k-event Ads block (11 columns) whole, and
// one column of it through ranged reads, interleaved, and reports the bytes
// moved and the time of the column read as fractions of the whole read:
// event_id alone (1 of 11 columns), and event_id+ad_title (what a worker
// computing a title feature reads, the largest column).
func BenchmarkReadOneColumn(b *testing.B) {
	meta, cols, full := adsBlock(b, 100_000)
	ctx := context.Background()
	var fullBytes, idBytes, titleBytes int64
	var fullT, idT, titleT time.Duration
	b.ResetTimer()
	for range b.N {
		n, d := full(ctx)
		fullBytes += n
		fullT += d
		r, n, d := cols(ctx, nil)
		if r.NumCols() != 1 || r.Column(0).(*array.Int64).Len() != 100_000 {
			b.Fatal("bad event_id read")
		}
		r.Release()
		idBytes += n
		idT += d
		r, n, d = cols(ctx, []string{"ad_title"})
		r.Release()
		titleBytes += n
		titleT += d
	}
	b.ReportMetric(float64(meta.Size)/(1<<20), "block_MB")
	b.ReportMetric(float64(fullT.Microseconds())/float64(b.N)/1000, "full_ms")
	b.ReportMetric(float64(idBytes)/float64(fullBytes), "event_id_bytes_frac")
	b.ReportMetric(idT.Seconds()/fullT.Seconds(), "event_id_time_frac")
	b.ReportMetric(float64(titleBytes)/float64(fullBytes), "ad_title_bytes_frac")
	b.ReportMetric(titleT.Seconds()/fullT.Seconds(), "ad_title_time_frac")
}

// BenchmarkEncode measures laying out a 100k-event block (no I/O).
func BenchmarkEncode(b *testing.B) {
	rec := gen.New(gen.Config{Seed: 1}).Records(100_000, 100_000)[0]
	defer rec.Release()
	m := testMeta()
	b.ResetTimer()
	var size int
	for range b.N {
		data, _, err := block.Encode(m, rec)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.SetBytes(int64(size))
	b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "events/s")
}
