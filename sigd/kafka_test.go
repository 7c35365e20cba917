package sigd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/ready"
	"github.com/sigdata/sig/warehouse/record"
)

// Every topic sigd reads or writes exists as soon as it serves, before
// anything is produced or memoized: a subscriber of sig.memo.ready (or kcat)
// that starts first finds the topic instead of "Unknown topic or partition".
func TestTopicsExistAtStart(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1})
	sigdtest.Start(t, w, sigd.Config{Ingest: []string{"ads"}}, sigd.Options{})
	cl, err := w.Kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := []string{ready.Topic, "raw.ads", "raw.ads.dlq"}
	td, err := kadm.NewClient(cl).ListTopics(ctx, want...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if d, ok := td[name]; !ok || d.Err != nil || len(d.Partitions) == 0 {
			t.Errorf("topic %s at start: %+v", name, d)
		}
	}
	// A subscriber's fetch of the empty topic succeeds (no error, no record).
	sub, err := w.Kafka.Client(kgo.ConsumeTopics(ready.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	f := sub.PollFetches(pctx)
	f.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("fetch %s[%d]: %v", topic, p, err)
		}
	})
	if n := f.NumRecords(); n != 0 {
		t.Errorf("%d records on %s before any memo was written", n, ready.Topic)
	}
}

// devState reads what `sigd dev` wrote to DATA_DIR/dev.json: its MinIO's
// endpoint and keys and its Kafka address.
func devState(t *testing.T, dir string) (s3Endpoint, accessKey, secretKey, kafkaBroker string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		S3Endpoint   string `json:"s3_endpoint"`
		S3AccessKey  string `json:"s3_access_key"`
		S3SecretKey  string `json:"s3_secret_key"`
		KafkaBrokers string `json:"kafka_brokers"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.S3Endpoint, st.S3AccessKey, st.S3SecretKey, st.KafkaBrokers
}

// kafkaOffsets returns raw.ads's end offset and the ingestion group's
// committed offset (summed over partitions; -1 for none committed).
func kafkaOffsets(ctx context.Context, broker string) (end, committed int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "raw.ads")
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			end += o.Offset
		}
	})
	co, err := adm.FetchOffsets(ctx, "sig-ingest-ads")
	if err != nil {
		return end, 0, err
	}
	committed = -1
	co.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "raw.ads" && o.Err == nil && o.At >= 0 {
			committed = max(committed, 0) + o.At
		}
	})
	return end, committed, nil
}

// `sigd dev` is killed with SIGKILL while events that Kafka acknowledged are
// not yet in sealed blocks. After a restart on the same data directory every
// event, those and the ones produced after the restart, is in the catalogued
// blocks exactly once: the embedded Kafka kept raw.ads (sigd created it, so
// it persists), and ingestion resumed from the committed offset.
func TestDevKillKeepsAckedEvents(t *testing.T) {
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	dir := t.TempDir()
	args := func(sealAfter string) []string {
		return []string{"dev", "--data-dir", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
			"--workers-min", "1", "--workers-max", "1", "--rows-per-block", "2000", "--seal-after", sealAfter}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Events of one hour window, 100 a second: 4,500 span 45 s.
	g := gen.New(gen.Config{Seed: 8, LateFraction: -1})
	produce := func(broker string, n int) {
		t.Helper()
		// Producers such as kcat and sigctl gen (before it created its
		// topic) ask the broker to create a missing topic.
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := g.Produce(ctx, cl, "raw.ads", n, record.ContentTypeRow); err != nil {
			t.Fatal(err)
		}
	}
	waitCommitted := func(broker string, want int64) {
		t.Helper()
		var end, committed int64
		var err error
		waitFor(t, time.Minute, fmt.Sprintf("ingestion to commit %d events", want), func() bool {
			end, committed, err = kafkaOffsets(ctx, broker)
			if err == nil && end != want {
				t.Fatalf("raw.ads holds %d records, %d were acknowledged", end, want)
			}
			return err == nil && committed == want
		})
	}

	// ingesting waits until sigd's ingestion has started (its dead-letter
	// topic exists), as a user would wait for the service to be up before
	// producing.
	ingesting := func(broker string) {
		t.Helper()
		waitFor(t, time.Minute, "ingestion to start", func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			td, err := kadm.NewClient(cl).ListTopics(ctx, "raw.ads.dlq")
			return err == nil && td["raw.ads.dlq"].Err == nil
		})
	}

	p := sigdtest.StartProcess(t, bin, args("1h"))
	_, _, _, broker := devState(t, dir)
	ingesting(broker)
	// 2,000 events fill a block, which is sealed and committed.
	produce(broker, 2000)
	waitCommitted(broker, 2000)
	// 1,500 more are acknowledged but stay in an open buffer (--seal-after
	// 1h); the kill loses the buffer, not the events.
	produce(broker, 1500)
	time.Sleep(time.Second)
	p.Kill()

	p = sigdtest.StartProcess(t, bin, args("1s"))
	ingesting(broker)
	produce(broker, 1000)
	waitCommitted(broker, 4500)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "sigd to exit", p.Exited)

	// Read the blocks with the dev MinIO started on its data again.
	_, ak, sk, _ := devState(t, dir)
	m, err := devenv.StartMinIO(ctx, devenv.MinIOConfig{Dir: filepath.Join(dir, "minio"), AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	store, err := objstore.New(objstore.Config{Endpoint: m.Endpoint, AccessKey: ak, SecretKey: sk, Bucket: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	blocks, err := cat.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, b := range blocks {
		rec, err := block.ReadColumns(ctx, store, b, []string{transform.ColEventID})
		if err != nil {
			t.Fatal(err)
		}
		ids := rec.Column(0).(*array.Int64)
		for i := range ids.Len() {
			seen[ids.Value(i)]++
		}
		rec.Release()
	}
	var missing, dup int
	for id := int64(1); id <= 4500; id++ {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	if missing > 0 || dup > 0 || len(seen) != 4500 {
		t.Fatalf("%d blocks: %d of 4500 events missing, %d duplicated, %d distinct ids", len(blocks), missing, dup, len(seen))
	}
}

// scrape GETs url (a /metrics endpoint) and returns its text and each
// series' value, keyed by the series as exposed ("name{label="v",...}",
// labels sorted by name).
func scrape(t *testing.T, url string) (string, map[string]float64) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return string(b), out
}

// Ingestion's counts are on sigd's /metrics: records consumed, events
// ingested, blocks sealed, late blocks and their events, and dead letters by
// reason code (every code, zeros included), and the series pass promlint.
func TestIngestMetrics(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1})
	srv := sigdtest.Start(t, w, sigd.Config{Ingest: []string{"ads"}, RowsPerBlock: 500, SealAfter: time.Second}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := w.Kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// 1,000 events over 4,000 s of event time close the first hour's window;
	// 10 more in it are late, and make a new version of its last block. (March: the warehouse's catalogued blocks
	// claim January's windows.)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	g := gen.New(gen.Config{Seed: 21, Start: start, EventsPerSecond: 0.25, LateFraction: -1})
	if err := g.Produce(ctx, cl, "raw.ads", 1000, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
	late := gen.New(gen.Config{Seed: 22, EventsPerSecond: 1, LateFraction: -1, FirstEventID: 5000,
		Start: start.Add(30 * time.Minute)})
	if err := late.Produce(ctx, cl, "raw.ads", 10, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
	js, _ := record.NewEncoder(transform.AdsSchema(), record.ContentTypeJSON)
	ev := g.Next()
	ev.EventTime = math.MaxInt64
	for _, r := range []*kgo.Record{
		{Topic: "raw.ads", Value: []byte("not json")},
		{Topic: "raw.ads", Value: []byte("a,b"), Headers: []kgo.RecordHeader{{Key: "Content-Type", Value: []byte("text/csv")}}},
		{Topic: "raw.ads", Value: ev.Encode(js)},
	} {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	url := "http://" + srv.HTTPAddr() + "/metrics"
	var got map[string]float64
	var text string
	waitFor(t, time.Minute, "1,010 events ingested and 3 dead letters", func() bool {
		text, got = scrape(t, url)
		return got[`sig_ingest_rows_total{source="ads"}`] == 1010 && got[`sig_ingest_records_total{source="ads"}`] == 1013
	})
	want := map[string]float64{
		`sig_ingest_late_rows_total{source="ads"}`:                              10,
		`sig_ingest_late_blocks_total{source="ads"}`:                            0, // appended to the window's newest block:
		`sig_ingest_block_versions_total{kind="late",source="ads"}`:             1, // its version 2
		`sig_ingest_dead_letters_total{reason="syntax",source="ads"}`:           1,
		`sig_ingest_dead_letters_total{reason="content_type",source="ads"}`:     1,
		`sig_ingest_dead_letters_total{reason="event_time_range",source="ads"}`: 1,
		`sig_ingest_dead_letters_total{reason="schema",source="ads"}`:           0,
		`sig_ingest_dead_letters_total{reason="oversized",source="ads"}`:        0,
		`sig_ingest_dead_letters_total{reason="event_time_ahead",source="ads"}`: 0,
		`sig_ingest_skipped_records_total{source="ads"}`:                        0,
		`sig_ingest_offset_resets_total{reason="past_end",source="ads"}`:        0,
		`sig_ingest_offset_resets_total{reason="before_start",source="ads"}`:    0,
	}
	for series, v := range want {
		if g, ok := got[series]; !ok || g != v {
			t.Errorf("%s = %v (exported: %v), want %v", series, g, ok, v)
		}
	}
	if n := got[`sig_ingest_blocks_total{source="ads"}`]; n < 3 {
		t.Errorf("%v blocks sealed, want at least 3 (two windows of 500-row blocks)", n)
	}
	var ours []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "sig_ingest_") {
			ours = append(ours, line)
		}
	}
	problems, err := promlint.New(strings.NewReader(strings.Join(ours, "\n") + "\n")).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
}
