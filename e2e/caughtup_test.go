package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
)

const (
	source   = "ads"
	topic    = "raw.ads"
	pipeline = "caughtup"
	// windowEvents events per hourly window, windows of them.
	windowEvents = 600
	windows      = 6
)

// dev is a `sigd dev` process on a fixed address and data directory, so a
// restart after SIGKILL comes back where it was.
type dev struct {
	bin, dir, addr string
	extra          []string // more `sigd dev` flags
	p              *sigdtest.Process
	s3             objstore.Config
	broker         string
	tokens         map[string]string
}

// startDev starts `sigd dev` with 1,000-row blocks sealed 1 s after their
// first row, unless extra flags say otherwise (later flags win).
func startDev(t testing.TB, extra ...string) *dev {
	d := &dev{bin: sigdtest.BuildCommand(t, "cmd/sigd"), dir: t.TempDir(), addr: sigdtest.FreeAddr(t), extra: extra}
	d.start(t)
	b, err := os.ReadFile(filepath.Join(d.dir, "dev.json"))
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
	d.s3 = objstore.Config{Endpoint: st.S3Endpoint, AccessKey: st.S3AccessKey, SecretKey: st.S3SecretKey, Bucket: "sig"}
	d.broker = st.KafkaBrokers
	tb, err := os.ReadFile(filepath.Join(d.dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f auth.File
	if err := json.Unmarshal(tb, &f); err != nil {
		t.Fatal(err)
	}
	d.tokens = map[string]string{}
	for _, e := range f.Tokens {
		d.tokens[e.Principal.Name] = e.Token
	}
	return d
}

func (d *dev) start(t testing.TB) {
	d.p = sigdtest.StartProcess(t, d.bin, append([]string{"dev", "--data-dir", d.dir, "--listen", d.addr, "--http", "127.0.0.1:0",
		"--workers-min", "1", "--workers-max", "2", "--rows-per-block", "1000", "--seal-after", "1s"}, d.extra...))
}

func (d *dev) sig(t testing.TB, principal string) sigv1.SIGClient {
	return sigv1.NewSIGClient(sigdtest.Dial(t, d.addr, d.tokens[principal]))
}

// waitFor polls cond every 100ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCaughtUpVersions is issue 21's end-to-end run. A pipeline trains
// (`trainer run --follow`) over six hourly windows of events produced to
// Kafka, through the switch to the caught-up phase, while changes arrive
// through Kafka as any producer sends them: late events for closed windows,
// label updates (click), feature updates (query) and deletions, each a new
// version of a sealed block. `sigd dev` (with its ingestion) and the trainer
// are killed with SIGKILL mid-run and restarted. Then:
//
//   - every unit the last checkpoint's ledger holds is a block version, and
//     trained exactly that version's events, each once; every block's newest
//     version is among them (nothing lost), and no unit twice (nothing
//     duplicated), deleted events are absent from the newest versions and
//     late ones present;
//   - a memo object exists at a version only if that version changed a
//     column its component reads: a label update recomputed nothing, a
//     query update only the components reading query (the counts are
//     logged), and the solution at the newest versions is complete.
func TestCaughtUpVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: several processes, about a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := startDev(t)
	store, err := objstore.New(d.s3)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(d.broker))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	waitFor(t, time.Minute, "ingestion to start", func() bool {
		td, err := kadm.NewClient(kc).ListTopics(ctx, topic+".dlq")
		return err == nil && td[topic+".dlq"].Err == nil
	})

	// Six hourly windows of events; the generator is deterministic, so a
	// second one with the same seed names the same events for changes.
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	gcfg := gen.Config{Seed: 21, Start: start, EventsPerSecond: float64(windowEvents) / 3600, LateFraction: -1}
	if err := gen.New(gcfg).Produce(ctx, kc, topic, windows*windowEvents, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
	events := map[int][]gen.Event{} // window -> its events
	g := gen.New(gcfg)
	for range windows * windowEvents {
		ev := g.Next()
		w := int((ev.EventTime - start.UnixMicro()) / time.Hour.Microseconds())
		events[w] = append(events[w], ev)
	}
	op := d.sig(t, "operator")
	rows := func() int64 {
		var n int64
		req := &sigv1.ListBlocksRequest{Source: source}
		for {
			resp, err := op.ListBlocks(ctx, req)
			if err != nil {
				return -1
			}
			for _, b := range resp.GetBlocks() {
				n += b.GetRows()
			}
			if resp.GetNextPageToken() == "" {
				return n
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
	waitFor(t, time.Minute, "the events to be catalogued", func() bool { return rows() == windows*windowEvents })

	// The job follows the stream from the first window on.
	trainerBin := sigdtest.BuildCommand(t, "cmd/trainer")
	dir := t.TempDir()
	graph := filepath.Join(dir, "graph.sig")
	if err := os.WriteFile(graph, []byte(sigdtest.DSL(t, "ctr_small")), 0o600); err != nil {
		t.Fatal(err)
	}
	trainerArgs := []string{"run", "--client", "ctr", "--pipeline", pipeline, "--graph", graph,
		"--range", fmt.Sprintf("%d:", start.UnixMicro()), "--follow",
		"--sigd", d.addr, "--token", d.tokens["trainer-ctr"],
		"--s3-endpoint", d.s3.Endpoint, "--s3-access-key", d.s3.AccessKey, "--s3-secret-key", d.s3.SecretKey, "--s3-bucket", d.s3.Bucket,
		"--kafka-brokers", d.broker, "--hosts", "1", "--chips", "2", "--caught-up-chips", "1",
		"--epoch-units", "2", "--caught-up-epoch-units", "2", "--batch-size", "128", "--read-batch-rows", "256",
		"--vocab", "4096", "--compile-time", "10ms", "--hold-poll", "300ms", "--status-interval", "0",
		"--report-json", filepath.Join(dir, "report.json"), "--report-text", ""}
	tr := sigdtest.StartProcess(t, trainerBin, trainerArgs)
	cs, err := checkpoint.NewStore(store, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	epochs := func() int {
		m, err := cs.Latest(ctx)
		if err != nil || m == nil {
			return 0
		}
		return m.Epochs
	}
	waitFor(t, 2*time.Minute, "the first epoch", func() bool { return epochs() >= 1 })

	// Changes, as a producer sends them (keyed as the events were).
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	update := func(ev gen.Event, col string, v any) *kgo.Record {
		r, err := gen.UpdateRecord(topic, ev, map[string]any{col: v})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var changes []*kgo.Record
	deleted := map[int64]bool{}
	for i := 0; i < 10; i++ {
		changes = append(changes, update(events[1][i*7], "click", int64(1-events[1][i*7].Click)))
		changes = append(changes, update(events[2][i*5], "query", fmt.Sprintf("changed query %d", i)))
		changes = append(changes, gen.DeleteRecord(topic, events[3][i*11]))
		deleted[events[3][i*11].EventID] = true
	}
	// Late events: window 1 again, new ids.
	late := gen.New(gen.Config{Seed: 22, Start: start.Add(90 * time.Minute), EventsPerSecond: 1, LateFraction: -1, FirstEventID: 1_000_000})
	if err := late.Produce(ctx, kc, topic, 20, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
	produce(changes...)

	// Ingestion (inside sigd dev) and sigd die while the changes are
	// being ingested and the job trains.
	time.Sleep(700 * time.Millisecond)
	d.p.Kill()
	time.Sleep(500 * time.Millisecond)
	d.start(t)

	// The trainer (controller, hosts, readers) dies mid-epoch.
	e := epochs()
	waitFor(t, 2*time.Minute, "an epoch after sigd's restart", func() bool { return epochs() > e })
	time.Sleep(150 * time.Millisecond)
	tr.Kill()
	time.Sleep(300 * time.Millisecond)
	tr = sigdtest.StartProcess(t, trainerBin, trainerArgs)

	// More label-only changes, later: window 4.
	var more []*kgo.Record
	for i := 0; i < 10; i++ {
		ev := events[4][i*3]
		more = append(more, update(ev, "click", int64(1-ev.Click)))
	}
	produce(more...)

	// Wait until ingestion committed every record produced (the changes
	// are in versions), then until the job trained every block's newest
	// version and SIG memoized every input of them.
	waitFor(t, 2*time.Minute, "ingestion to commit every record", func() bool { return ingested(ctx, kc) })
	tc := d.sig(t, "trainer-ctr")
	var sol *sigv1.ReadSolution
	var man *checkpoint.Manifest
	waitFor(t, 3*time.Minute, "the job to train every newest version", func() bool {
		s, err := tc.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: pipeline})
		if err != nil || !s.GetComplete() {
			return false
		}
		m, err := cs.Latest(ctx)
		if err != nil || m == nil {
			return false
		}
		for _, rb := range s.GetRawBlocks() {
			if !slices.Contains(m.Units, blockref.New(rb.GetBlockId(), rb.GetVersion())) {
				return false
			}
		}
		sol, man = s, m
		return true
	})
	tr.Kill()

	checkLedger(t, ctx, store, cs, man, sol, deleted)
	checkMemo(t, ctx, store, sol)
}

// ingested reports whether the ingestion group committed raw.ads's end on
// every partition: every record produced is in a catalogued block version
// (or dead-lettered).
func ingested(ctx context.Context, kc *kgo.Client) bool {
	adm := kadm.NewClient(kc)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	co, err := adm.FetchOffsets(ctx, "sig-ingest-"+source)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		c, found := co.Lookup(topic, o.Partition)
		if o.Err != nil || !found || c.Err != nil || c.At != o.Offset {
			ok = false
		}
	})
	return ok
}

// checkLedger: every unit of the ledger trained exactly its version's
// events, once.
func checkLedger(t *testing.T, ctx context.Context, store *objstore.Store, cs *checkpoint.Store, man *checkpoint.Manifest, sol *sigv1.ReadSolution, deleted map[int64]bool) {
	t.Helper()
	_, led, err := cs.Load(ctx, man)
	if err != nil {
		t.Fatal(err)
	}
	units := map[blockref.Ref]bool{}
	trainedBlock := map[string]bool{} // blocks a unit before this one trained
	versions, retrained := 0, 0
	for _, u := range led.Units {
		if units[u.Unit] {
			t.Errorf("unit %s twice in the ledger", u.Unit)
		}
		units[u.Unit] = true
		id, v := u.Unit.ID(), u.Unit.Version()
		if v > 1 {
			versions++
		}
		if trainedBlock[id] {
			retrained++
		}
		trainedBlock[id] = true
		meta, err := block.ReadFooter(ctx, store, block.RawKey(source, u.Unit))
		if err != nil {
			t.Fatalf("unit %s: %v", u.Unit, err)
		}
		rec, err := block.ReadColumns(ctx, store, meta, []string{transform.ColEventID})
		if err != nil {
			t.Fatal(err)
		}
		want := rec.Column(0).(*array.Int64).Int64Values()
		got := u.IDs()
		seen := map[int64]bool{}
		for _, x := range got {
			if seen[x] {
				t.Errorf("unit %s: event %d trained twice", u.Unit, x)
			}
			seen[x] = true
		}
		if len(got) != len(want) {
			t.Errorf("unit %s: %d events trained, the version holds %d", u.Unit, len(got), len(want))
		}
		for _, x := range want {
			if !seen[x] {
				t.Errorf("unit %s: event %d of the version not trained", u.Unit, x)
				break
			}
		}
		rec.Release()
	}
	newest := map[int64]bool{}
	for _, rb := range sol.GetRawBlocks() {
		ref := blockref.New(rb.GetBlockId(), rb.GetVersion())
		if !units[ref] {
			t.Errorf("newest version %s not trained", ref)
		}
		for _, u := range led.Units {
			if u.Unit == ref {
				for _, x := range u.IDs() {
					newest[x] = true
				}
			}
		}
	}
	for x := range deleted {
		if newest[x] {
			t.Errorf("deleted event %d is in a newest version", x)
		}
	}
	lateSeen := 0
	for x := range newest {
		if x >= 1_000_000 {
			lateSeen++
		}
	}
	if lateSeen != 20 {
		t.Errorf("%d of 20 late events in the newest versions", lateSeen)
	}
	if versions == 0 {
		t.Error("no unit of a changed version was trained")
	}
	if retrained != man.Retrained {
		t.Errorf("the ledger trains %d units of a block trained before, the manifest counts %d", retrained, man.Retrained)
	}
	t.Logf("ledger: %d units, %d of a version >= 2, %d epochs, manifest retrained=%d snapshot=%d", len(led.Units), versions, man.Epochs, man.Retrained, man.Snapshot)
}

// checkMemo: a memo object at version N >= 2 exists only where version N
// changed a column its component reads.
func checkMemo(t *testing.T, ctx context.Context, store *objstore.Store, sol *sigv1.ReadSolution) {
	t.Helper()
	cols := map[canon.Key][]string{} // component key -> raw columns read
	for _, in := range sol.GetInputs() {
		k, err := canon.ParseKey(in.GetComponentKey())
		if err != nil {
			t.Fatalf("input %s: component_key: %v", in.GetInput(), err)
		}
		cols[k] = in.GetColumns()
	}
	footers := map[string]block.Meta{}
	footer := func(id string, v int64) block.Meta {
		k := block.RawKey(source, blockref.New(id, v))
		if m, ok := footers[k]; ok {
			return m
		}
		m, err := block.ReadFooter(ctx, store, k)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		footers[k] = m
		return m
	}
	recomputed, labelOnly, unneeded := 0, 0, 0
	changedVersions := map[blockref.Memo]bool{}
	type member struct {
		key  string
		ck   canon.Key
		memo blockref.Memo
	}
	var members []member
	for info, err := range store.List(ctx, block.MemoPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		// A memo object is named by its block at an input version, not a
		// raw version (blockref.Memo); a pack (issue 28) holds members,
		// each at its input version.
		if ck, memo, ok := block.ParseMemoKey(info.Key); ok {
			members = append(members, member{info.Key, ck, memo})
			continue
		}
		if _, _, ok := block.ParsePackKey(info.Key); !ok {
			continue
		}
		pm, err := block.ReadFooter(ctx, store, info.Key)
		if err != nil {
			t.Fatalf("%s: %v", info.Key, err)
		}
		for _, c := range pm.Columns[1:] {
			ck, err := canon.ParseKey(c.Name)
			if err != nil {
				t.Fatalf("%s: %v", info.Key, err)
			}
			members = append(members, member{info.Key + " column " + c.Name[:12], ck, pm.Member(c)})
		}
	}
	for _, mb := range members {
		info, ck, memo := struct{ Key string }{mb.key}, mb.ck, mb.memo
		id, v := memo.ID(), memo.InputVersion()
		if v < 2 {
			continue
		}
		recomputed++
		changedVersions[memo] = true
		m := footer(id, v)
		touched := false
		for _, c := range cols[ck] {
			if m.ColumnVersions[c] == v {
				touched = true
			}
		}
		if !touched {
			unneeded++
			t.Errorf("memo object %s: version %d of %s changed none of its component's columns %v (%v)", info.Key, v, id, cols[ck], m.ColumnVersions)
		}
	}
	// Versions that changed only labels: no memo object at them.
	for _, rb := range sol.GetRawBlocks() {
		for v := int64(2); v <= rb.GetVersion(); v++ {
			m := footer(rb.GetBlockId(), v)
			only := true
			for c, cv := range m.ColumnVersions {
				if cv == v && c != "click" && c != "conversion" {
					only = false
				}
			}
			if only {
				labelOnly++
				if changedVersions[blockref.NewMemo(rb.GetBlockId(), v)] {
					t.Errorf("version %d of %s changed only labels, yet a memo object was computed for it", v, rb.GetBlockId())
				}
			}
		}
	}
	if labelOnly == 0 {
		t.Error("no label-only version was made")
	}
	t.Logf("memo: %d objects recomputed for new versions (%d unneeded), %d label-only versions recomputed nothing, %d components", recomputed, unneeded, labelOnly, len(cols))
}
