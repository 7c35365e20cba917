package ingest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
)

// env is one test's MinIO, kfake, bucket and catalog directory.
type env struct {
	minio      *devenv.MinIO
	kafka      *devenv.Kafka
	store      *objstore.Store
	catalogDir string
}

func newEnv(t testing.TB, partitions int32) *env {
	t.Helper()
	m := devenv.NewMinIO(t)
	k := devenv.NewKafka(t, devenv.KafkaConfig{Topics: []string{"raw.ads", "raw.ads.dlq"}, Partitions: partitions})
	s := m.NewStore(t, objstore.Config{Bucket: "warehouse", AttemptTimeout: 5 * time.Second})
	return &env{minio: m, kafka: k, store: s, catalogDir: filepath.Join(t.TempDir(), "catalog")}
}

// produce sends n generated events (row encoding) to raw.ads.
func (e *env) produce(t testing.TB, cfg gen.Config, n int) {
	t.Helper()
	cl, err := e.kafka.Client(kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := gen.New(cfg).Produce(context.Background(), cl, "raw.ads", n, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
}

// lag returns how many records of topic the group has not committed.
func (e *env) lag(ctx context.Context, group, topic string) (int64, error) {
	cl, err := e.kafka.Client()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c := int64(0)
		if r, ok := committed.Lookup(topic, o.Partition); ok && r.Err == nil && r.At >= 0 {
			c = r.At
		}
		lag += o.Offset - c
	})
	return lag, nil
}

// waitCaughtUp waits until the group has committed every record of raw.ads.
func (e *env) waitCaughtUp(t testing.TB, group string, timeout time.Duration, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		lag, err := e.lag(context.Background(), group, "raw.ads")
		if err == nil && lag == 0 {
			return
		}
		if alive != nil {
			if err := alive(); err != nil {
				t.Fatalf("ingester died: %v", err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not caught up after %v: lag %d, %v", group, timeout, lag, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// verifyExactlyOnce reads the event_id column of every catalogued block and
// checks that ids first..first+n-1 each appear exactly once and nothing
// else does. It returns the catalogued blocks.
func verifyExactlyOnce(t testing.TB, store *objstore.Store, catalogDir string, first int64, n int) []block.Meta {
	t.Helper()
	return verifyExactlyOnceExcept(t, store, catalogDir, first, n, nil)
}

// verifyExactlyOnceExcept is verifyExactlyOnce where the ids of deleted
// must appear nowhere instead.
func verifyExactlyOnceExcept(t testing.TB, store *objstore.Store, catalogDir string, first int64, n int, deleted map[int64]bool) []block.Meta {
	t.Helper()
	c, err := catalog.Open(catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return verifyExactlyOnceInExcept(t, store, c, first, n, deleted)
}

// verifyExactlyOnceIn is verifyExactlyOnce of an open catalog.
func verifyExactlyOnceIn(t testing.TB, store *objstore.Store, c *catalog.Catalog, first int64, n int) []block.Meta {
	t.Helper()
	return verifyExactlyOnceInExcept(t, store, c, first, n, nil)
}

func verifyExactlyOnceInExcept(t testing.TB, store *objstore.Store, c *catalog.Catalog, first int64, n int, deleted map[int64]bool) []block.Meta {
	t.Helper()
	blocks, err := c.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]uint8, n)
	extra := 0
	rows := int64(0)
	for _, m := range blocks {
		rec, err := block.ReadColumns(context.Background(), store, m, nil)
		if err != nil {
			t.Fatalf("read %s: %v", m.Key, err)
		}
		ids := rec.Column(0).(*array.Int64)
		for i := range ids.Len() {
			id := ids.Value(i) - first
			if id < 0 || id >= int64(n) {
				extra++
				continue
			}
			if seen[id] < 255 {
				seen[id]++
			}
		}
		rows += rec.NumRows()
		if rec.NumRows() != m.Rows {
			t.Fatalf("block %s: %d rows, catalog says %d", m.ID, rec.NumRows(), m.Rows)
		}
		rec.Release()
	}
	missing, dup := 0, 0
	var examples []string
	for i, s := range seen {
		if deleted[first+int64(i)] {
			if s > 0 {
				dup++
				if len(examples) < 5 {
					examples = append(examples, fmt.Sprintf("deleted %d x%d", first+int64(i), s))
				}
			}
			continue
		}
		switch {
		case s == 0:
			missing++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("missing %d", first+int64(i)))
			}
		case s > 1:
			dup++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("id %d x%d", first+int64(i), s))
			}
		}
	}
	if missing > 0 || dup > 0 || extra > 0 {
		t.Fatalf("%d blocks, %d rows: %d ids missing, %d duplicated, %d unexpected (%v)", len(blocks), rows, missing, dup, extra, examples)
	}
	return blocks
}

// deadLetters reads n records of raw.ads.dlq and returns their headers,
// checking that each says where it came from.
func (e *env) deadLetters(t testing.TB, n int) []map[string]string {
	t.Helper()
	dl, err := e.kafka.Client(kgo.ConsumeTopics("raw.ads.dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []map[string]string
	for len(out) < n && ctx.Err() == nil {
		dl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			if h[ingest.HeaderDLQTopic] != "raw.ads" || h[ingest.HeaderDLQOffset] == "" {
				t.Errorf("dead letter without provenance headers: %v", h)
			}
			out = append(out, h)
		})
	}
	if len(out) != n {
		var reasons []string
		for _, h := range out {
			reasons = append(reasons, h[ingest.HeaderDLQReason])
		}
		t.Fatalf("%d dead letters on the topic, want %d: %s", len(out), n, strings.Join(reasons, "; "))
	}
	return out
}
