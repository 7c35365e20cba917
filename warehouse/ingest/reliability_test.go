package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

var (
	buildOnce sync.Once
	sigctlBin string
	buildErr  error
)

// sigctl builds cmd/sigctl once per test binary.
func sigctl(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := devenv.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sigctl-build")
		if err != nil {
			buildErr = err
			return
		}
		sigctlBin = filepath.Join(dir, "sigctl")
		cmd := exec.Command("go", "build", "-o", sigctlBin, "./cmd/sigctl")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/sigctl: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return sigctlBin
}

// ingestProc is a `sigctl ingest` subprocess.
type ingestProc struct {
	cmd  *exec.Cmd
	out  syncBuffer
	done chan error
}

// syncBuffer is a bytes.Buffer the process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (e *env) startIngestProc(t *testing.T, extra ...string) *ingestProc {
	t.Helper()
	return e.startIngestProcEnv(t, nil, extra...)
}

// startIngestProcEnv starts `sigctl ingest` with environment variables
// env besides the store's.
func (e *env) startIngestProcEnv(t *testing.T, env []string, extra ...string) *ingestProc {
	t.Helper()
	args := append([]string{"ingest", "--kafka-brokers", strings.Join(e.kafka.Brokers, ","),
		"--catalog", e.catalogDir, "--s3-bucket", "warehouse", "--instance-id", "ingest-0",
		"--rows-per-block", "20000", "--seal-after", "2s", "--log-level", "warn"}, extra...)
	p := &ingestProc{cmd: exec.Command(sigctl(t), args...), done: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), env...),
		"SIG_S3_ENDPOINT="+e.minio.Endpoint,
		"SIG_S3_ACCESS_KEY="+e.minio.AccessKey,
		"SIG_S3_SECRET_KEY="+e.minio.SecretKey)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// alive returns an error if the process has exited.
func (p *ingestProc) alive() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("exited: %v\n%s", err, p.out.String())
	default:
		return nil
	}
}

func (p *ingestProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("ingester did not exit on %v", sig)
	}
}

// One million events are ingested while the ingesting process (a real
// `sigctl ingest`) is SIGKILLed at random moments, eight times, and
// restarted; producers keep writing meanwhile: events (some late), and
// after each chunk of events, updates of a label and of a feature column
// and deletes of events of the chunk before (changeStream). Afterwards every
// event not deleted is in the catalogued blocks exactly once with the values
// of its last update, no deleted one is, every block's versions follow each
// other, and a catalog rebuilt from the bucket alone equals the one
// ingestion built.
func TestKillRestartExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Log("-short: ingesting 100k events instead of 1M")
	}
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	e := newEnv(t, 4)
	sigctl(t)

	cfg := gen.Config{Seed: 42, EventsPerSecond: 200, LateFraction: 0.002}
	g := gen.New(cfg)
	changes := newChangeStream(cfg)
	// One-minute windows: a chunk of events (25 s of event time) often
	// ends a window, so the changes of the chunk before land in a closed
	// window, in buffers of their own, while the current window's buffer
	// holds the committed offset back: a kill then leaves catalogued
	// change buffers to be consumed again, which must not apply twice.
	windows := []string{"--window", "1m", "--lateness", "1s"}
	produced := make(chan error, 1)
	go func() {
		cl, err := e.kafka.Client(kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			produced <- err
			return
		}
		defer cl.Close()
		const chunks = 20
		for i := range chunks {
			if err := g.Produce(context.Background(), cl, "raw.ads", n/chunks, record.ContentTypeRow); err != nil {
				produced <- err
				return
			}
			// The changes of the chunk before: their events are stored
			// (or buffered) by now.
			if err := changes.produce(cl, n/chunks); err != nil {
				produced <- err
				return
			}
			if i < chunks-1 {
				time.Sleep(400 * time.Millisecond)
			}
		}
		produced <- changes.produce(cl, 0)
	}()

	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills, killsWithLag := 0, 0
	for kills < 8 {
		p := e.startIngestProc(t, windows...)
		time.Sleep(time.Duration(500+r.IntN(2000)) * time.Millisecond)
		if err := p.alive(); err != nil {
			t.Fatalf("ingester exited before the kill: %v", err)
		}
		lag, _ := e.lag(context.Background(), "sig-ingest-ads", "raw.ads")
		p.signal(t, syscall.SIGKILL)
		kills++
		if lag > 0 {
			killsWithLag++
		}
		t.Logf("kill %d: %d records not committed", kills, lag)
	}
	if killsWithLag < 5 {
		t.Fatalf("only %d of %d kills happened with uncommitted records", killsWithLag, kills)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	p := e.startIngestProc(t, windows...)
	e.waitCaughtUp(t, "sig-ingest-ads", 5*time.Minute, p.alive)
	p.signal(t, syscall.SIGTERM)
	t.Logf("last run: %s", strings.TrimSpace(p.out.String()))

	blocks := verifyExactlyOnceExcept(t, e.store, e.catalogDir, 1, n, changes.deleted)
	changes.verify(t, e, e.catalogDir)
	late, versions := 0, 0
	for _, m := range blocks {
		if m.Late {
			late++
		}
		versions += int(m.Ref().Version()) - 1
	}
	t.Logf("%d blocks (%d late, %d later versions) hold %d events exactly once, %d deleted, %d updated, after %d kills",
		len(blocks), late, versions, n-len(changes.deleted), len(changes.deleted), len(changes.values), kills)
	if versions == 0 {
		t.Fatal("no block changed after it was sealed")
	}

	// Rebuild the catalog from the bucket alone and compare.
	rebuilt := filepath.Join(t.TempDir(), "rebuilt")
	out, err := exec.Command(sigctl(t), "warehouse", "rebuild-catalog", "--catalog", rebuilt, "--s3-bucket", "warehouse",
		"--s3-endpoint", e.minio.Endpoint, "--s3-access-key", e.minio.AccessKey, "--s3-secret-key", e.minio.SecretKey).CombinedOutput()
	if err != nil {
		t.Fatalf("rebuild-catalog: %v\n%s", err, out)
	}
	t.Logf("rebuild: %s", strings.TrimSpace(string(out)))
	rc, err := catalog.Open(rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.Blocks("ads")
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(noSeqs(got), noSeqs(blocks)) {
		t.Fatalf("rebuilt catalog has %d blocks, ingestion catalogued %d, or they differ", len(got), len(blocks))
	}
	verifyExactlyOnceExcept(t, e.store, rebuilt, 1, n, changes.deleted)
	changes.verify(t, e, rebuilt)
}

// changeStream is the updates and deletes TestKillRestartExactlyOnce sends,
// and what the stored events must look like after them. Per event id: a
// label update (conversion 7) of 1 in 40, a second one (conversion 9) of
// half of those, a feature update (query and click) of another 1 in 40, a
// delete of 1 in 61 (after any update); and per chunk a delete naming no
// event (dead-lettered).
type changeStream struct {
	shadow  *gen.Generator // the events' generator, replayed for their times
	deleted map[int64]bool
	// values are the expected click, conversion and query of every
	// updated event not deleted.
	values map[int64]changedValues
	chunk  []gen.Event
}

type changedValues struct {
	click, conversion int64
	query             string
}

func newChangeStream(cfg gen.Config) *changeStream {
	return &changeStream{shadow: gen.New(cfg), deleted: map[int64]bool{},
		values: map[int64]changedValues{}}
}

// produce sends the changes of the chunk replayed before (none the first
// time) and replays the next size events, the chunk just produced.
func (c *changeStream) produce(cl *kgo.Client, size int) error {
	var recs []*kgo.Record
	add := func(kind string, ev gen.Event, cols string) {
		v := fmt.Sprintf(`{"event_id":%d,"event_time":%d%s}`, ev.EventID, ev.EventTime, cols)
		recs = append(recs, &kgo.Record{Topic: "raw.ads", Key: strconv.AppendInt(nil, ev.EventID, 10), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: record.HeaderKind, Value: []byte(kind)}}})
	}
	for _, ev := range c.chunk {
		id := ev.EventID
		v := changedValues{click: ev.Click, conversion: ev.Conversion, query: ev.Query}
		changed := false
		if id%40 == 3 {
			add("update", ev, `,"conversion":7`)
			v.conversion, changed = 7, true
			if id%80 == 3 {
				add("update", ev, `,"conversion":9`)
				v.conversion = 9
			}
		}
		if id%40 == 17 {
			v.query, v.click, changed = fmt.Sprintf("changed %d", id), 1, true
			add("update", ev, fmt.Sprintf(`,"query":%q,"click":1`, v.query))
		}
		if id%61 == 5 {
			add("delete", ev, "")
			c.deleted[id] = true
			changed = false
		}
		if changed {
			c.values[id] = v
		}
	}
	if len(c.chunk) > 0 {
		ghost := c.chunk[0]
		ghost.EventID = -ghost.EventID
		add("delete", ghost, "")
	}
	c.chunk = c.chunk[:0]
	for range size {
		c.chunk = append(c.chunk, c.shadow.Next())
	}
	if len(recs) == 0 {
		return nil
	}
	return cl.ProduceSync(context.Background(), recs...).FirstErr()
}

// verify checks the updated events' values in the catalogued blocks of
// catalogDir, and that every block's versions are 1, 2, ... with readable
// objects.
func (c *changeStream) verify(t *testing.T, e *env, catalogDir string) {
	t.Helper()
	cat, err := catalog.Open(catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	blocks, err := cat.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	// Provenance: no change buffer applied twice. Per partition and
	// window, the Kafka spans of new blocks and of changes (one span may
	// make several blocks' versions, once each) are disjoint.
	type pw struct {
		partition int32
		window    int64
	}
	spans := map[pw]map[[2]int64]bool{}
	addSpan := func(k pw, s [2]int64) {
		if spans[k] == nil {
			spans[k] = map[[2]int64]bool{}
		}
		spans[k][s] = true
	}
	for _, m := range blocks {
		k := pw{m.Kafka.Partition, m.WindowStart}
		addSpan(k, [2]int64{m.Kafka.First, m.Kafka.Last})
		own := map[[2]int64]bool{}
		for _, ch := range m.Changes {
			s := [2]int64{ch.First, ch.Last}
			if own[s] {
				t.Fatalf("block %s: the change of offsets %d-%d was applied twice", m.ID, ch.First, ch.Last)
			}
			own[s] = true
			addSpan(k, s)
		}
	}
	for k, set := range spans {
		var ss [][2]int64
		for s := range set {
			ss = append(ss, s)
		}
		slices.SortFunc(ss, func(a, b [2]int64) int { return int(a[0] - b[0]) })
		for i := 1; i < len(ss); i++ {
			if ss[i][0] <= ss[i-1][1] {
				t.Fatalf("partition %d window %d: offsets %v and %v were both applied", k.partition, k.window, ss[i-1], ss[i])
			}
		}
	}
	seen := 0
	for _, m := range blocks {
		vs, err := cat.Versions("ads", m.ID)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			if v.Ref().Version() != int64(i+1) {
				t.Fatalf("block %s: versions %d at place %d", m.ID, v.Ref().Version(), i+1)
			}
		}
		rec, err := block.ReadColumns(context.Background(), e.store, m, []string{"click", "conversion", "query"})
		if err != nil {
			t.Fatalf("read %s: %v", m.Key, err)
		}
		ids, click := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		conv, query := rec.Column(2).(*array.Int64), rec.Column(3).(*array.String)
		for r := range ids.Len() {
			want, ok := c.values[ids.Value(r)]
			if !ok {
				continue
			}
			seen++
			got := changedValues{click.Value(r), conv.Value(r), query.Value(r)}
			if got != want {
				t.Fatalf("event %d in %s: %+v, want %+v", ids.Value(r), m.Key, got, want)
			}
		}
		rec.Release()
	}
	if seen != len(c.values) {
		t.Fatalf("%d updated events found, want %d", seen, len(c.values))
	}
}

// MinIO is down for 10 seconds in the middle of ingestion: the ingester waits
// and retries, then completes with nothing lost or duplicated.
func TestMinIOOutageDuringIngestion(t *testing.T) {
	e := newEnv(t, 2)
	const n = 200_000
	e.produce(t, gen.Config{Seed: 5, EventsPerSecond: 50}, n/2)
	stop := runIngester(t, e, func(c *ingest.Config) { c.RowsPerBlock = 10_000 })
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)

	e.minio.Kill()
	// Events keep arriving while the store is down.
	e.produce(t, gen.Config{Seed: 5, EventsPerSecond: 50, FirstEventID: n/2 + 1,
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n/2) * 20 * time.Millisecond)}, n/2)
	time.Sleep(10 * time.Second)
	lag, err := e.lag(context.Background(), "sig-ingest-ads", "raw.ads")
	if err != nil {
		t.Fatal(err)
	}
	if lag == 0 {
		t.Fatal("offsets were committed while the object store was down")
	}
	if err := e.minio.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(t, "sig-ingest-ads", 2*time.Minute, nil)
	st := stop()
	t.Logf("stats %+v, lag during outage %d", st, lag)
	verifyExactlyOnce(t, e.store, e.catalogDir, 1, n)
}

// Malformed records go to raw.ads.dlq with the reason; ingestion goes on and
// every valid event is ingested once, whatever the case of its content-type
// header's name and with media-type parameters (a charset other than UTF-8 is
// malformed).
func TestMalformedRecordsGoToDeadLetters(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	cl, err := e.kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := transform.AdsSchema()
	row, _ := record.NewEncoder(s, record.ContentTypeRow)
	js, _ := record.NewEncoder(s, record.ContentTypeJSON)
	g := gen.New(gen.Config{Seed: 9})
	ctRow := []kgo.RecordHeader{{Key: record.HeaderContentType, Value: []byte(record.ContentTypeRow)}}
	ctJSON := []kgo.RecordHeader{{Key: record.HeaderContentType, Value: []byte(record.ContentTypeJSON)}}
	bad := []struct {
		name, reason, code string
		rec                *kgo.Record
	}{
		{"garbage", "not JSON", record.ReasonSyntax, &kgo.Record{Value: []byte("\x00\x01garbage")}},
		{"truncated row", "malformed record", record.ReasonSyntax, &kgo.Record{Value: func() []byte { ev := g.Next(); b := ev.Encode(row); return b[:len(b)-3] }(), Headers: ctRow}},
		{"missing field", "missing column", record.ReasonSchema, &kgo.Record{Value: []byte(`{"event_id":1,"event_time":2}`), Headers: ctJSON}},
		{"wrong type", "want int64", record.ReasonSchema, &kgo.Record{Value: []byte(strings.Replace(string(func() []byte { ev := g.Next(); return ev.Encode(js) }()), `"click":`, `"click":"yes","x":`, 1)), Headers: ctJSON}},
		{"oversized", "oversized", record.ReasonOversized, &kgo.Record{Value: bytes.Repeat([]byte("x"), 100_000)}},
		{"unknown content type", "content-type", record.ReasonContentType, &kgo.Record{Value: []byte("a,b"), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("text/csv")}}}},
		{"latin-1 charset", "charset", record.ReasonContentType, &kgo.Record{Value: func() []byte { ev := g.Next(); return ev.Encode(js) }(),
			Headers: []kgo.RecordHeader{{Key: "Content-Type", Value: []byte("application/json; charset=iso-8859-1")}}}},
	}
	var want, codes []string
	id := int64(1000)
	for i := 0; i < 3000; i++ {
		if i%400 == 200 && len(bad) > 0 {
			b := bad[0]
			bad = bad[1:]
			b.rec.Topic = "raw.ads"
			if err := cl.ProduceSync(ctx, b.rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
			want = append(want, b.reason)
			codes = append(codes, b.code)
			continue
		}
		ev := g.Next()
		ev.EventID = id
		id++
		enc, hdr := row, ctRow
		switch i % 6 {
		case 0:
			enc, hdr = js, ctJSON
		case 1: // header names are case-insensitive
			hdr = []kgo.RecordHeader{{Key: "Content-Type", Value: []byte(record.ContentTypeRow)}}
		case 2: // a media type with parameters
			enc, hdr = js, []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json; charset=utf-8")}}
		case 4:
			enc, hdr = js, []kgo.RecordHeader{{Key: "CONTENT-TYPE", Value: []byte("Application/JSON;charset=UTF-8")}}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "raw.ads", Value: ev.Encode(enc), Headers: hdr}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	stop := runIngester(t, e, func(c *ingest.Config) { c.RowsPerBlock = 1000 })
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	st := stop()
	if st.DeadLetters != int64(len(want)) {
		t.Fatalf("stats %+v, want %d dead letters", st, len(want))
	}
	// By reason, in DeadLetterReasons' order.
	if want := []int64{1, 2, 2, 2, 0, 0, 0, 0}; !slices.Equal(st.DeadLettersByReason, want) {
		t.Errorf("dead letters by reason %v (%v), want %v", st.DeadLettersByReason, ingest.DeadLetterReasons, want)
	}
	verifyExactlyOnce(t, e.store, e.catalogDir, 1000, int(id-1000))

	dls := e.deadLetters(t, len(want))
	for i := range want {
		if reason := dls[i][ingest.HeaderDLQReason]; !strings.Contains(reason, want[i]) {
			t.Errorf("dead letter %d: reason %q, want it to mention %q", i, reason, want[i])
		}
		if code := dls[i][ingest.HeaderDLQReasonCode]; code != codes[i] {
			t.Errorf("dead letter %d: reason code %q, want %q", i, code, codes[i])
		}
	}
}
