package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

var w0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// changeRecords builds Kafka records of raw.ads keyed by event id.
type changeRecords struct {
	g   *gen.Generator
	enc *record.Encoder
	out []*kgo.Record
}

func newChangeRecords() *changeRecords {
	enc, _ := record.NewEncoder(transform.AdsSchema(), record.ContentTypeRow)
	return &changeRecords{g: gen.New(gen.Config{Seed: 3}), enc: enc}
}

func (c *changeRecords) event(id, t int64) {
	ev := c.g.Next()
	ev.EventID, ev.EventTime, ev.Click, ev.Conversion = id, t, 0, 0
	c.out = append(c.out, &kgo.Record{Topic: "raw.ads", Key: []byte(strconv.FormatInt(id, 10)), Value: ev.Encode(c.enc),
		Headers: []kgo.RecordHeader{{Key: record.HeaderContentType, Value: []byte(record.ContentTypeRow)}}})
}

// change adds an update (cols: JSON members) or, with cols "", a delete.
func (c *changeRecords) change(kind string, id, t int64, cols string) {
	v := fmt.Sprintf(`{"event_id":%d,"event_time":%d%s}`, id, t, cols)
	c.out = append(c.out, &kgo.Record{Topic: "raw.ads", Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(v),
		Headers: []kgo.RecordHeader{{Key: "Sig-Kind", Value: []byte(kind)}}})
}

func (c *changeRecords) send(t *testing.T, e *env) {
	t.Helper()
	cl, err := e.kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), c.out...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.out = nil
}

// readValues returns, per event id of the block version m, its click and
// conversion.
func readValues(t *testing.T, e *env, m block.Meta) map[int64][2]int64 {
	t.Helper()
	rec, err := block.ReadColumns(context.Background(), e.store, m, []string{"click", "conversion"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out := map[int64][2]int64{}
	ids, click, conv := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Int64)
	for i := range ids.Len() {
		out[ids.Value(i)] = [2]int64{click.Value(i), conv.Value(i)}
	}
	return out
}

// TestChangesMakeVersions: late events, updates and deletes of a sealed
// window make new versions of its blocks, written whole under new keys:
// a label update bumps only the label columns, a delete or late row every
// column; each version names the change records that made it; a snapshot
// taken before still reads the old versions; changes to unknown events and
// records of unknown kinds are dead-lettered; and a restart re-applies
// nothing.
func TestChangesMakeVersions(t *testing.T) {
	e := newEnv(t, 1)
	mod := func(c *ingest.Config) { c.RowsPerBlock = 100 }
	sec := int64(time.Second / time.Microsecond)

	// Window w0: events 1-250 (blocks of 100, 100, 50); events 1001-1010
	// two hours later close it.
	c := newChangeRecords()
	for id := int64(1); id <= 250; id++ {
		c.event(id, w0+id*sec)
	}
	for id := int64(1001); id <= 1010; id++ {
		c.event(id, w0+2*3600*sec+id)
	}
	c.send(t, e)
	stop := runIngester(t, e, mod)
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	stop()
	cat, err := catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	v1, _ := cat.Range("ads", w0, w0+3600*sec)
	s1, _ := cat.Snapshot()
	cat.Close()
	if len(v1) != 3 || v1[0].Rows != 100 || v1[2].Rows != 50 {
		t.Fatalf("window w0 sealed as %d blocks", len(v1))
	}

	// The changes, on the closed window.
	c.change("update", 5, w0+5*sec, `,"conversion":1`)
	c.change("delete", 7, w0+7*sec, "")
	c.change("UPDATE", 150, w0+150*sec, `,"click":1,"conversion":1`)
	c.event(300, w0+1800*sec) // late
	c.change("update", 300, w0+1800*sec, `,"click":1`)
	c.change("update", 9999, w0+9*sec, `,"click":1`) // no such event
	c.change("delete", 7, w0+7*sec, "")              // deleted already
	c.change("upsert", 8, w0+8*sec, `,"click":1`)    // no such kind
	c.send(t, e)
	stop = runIngester(t, e, mod)
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	st := stop()
	if st.Versions != 3 || st.VersionsUpdate != 2 || st.VersionsDelete != 1 || st.VersionsLate != 1 ||
		st.UpdatedRows != 2 || st.DeletedRows != 1 || st.DeadLetters != 3 || st.Blocks != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := st.DeadLettersByReason[len(st.DeadLettersByReason)-2:]; !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Fatalf("dead letters of reasons kind, unknown_event: %v", got)
	}

	cat, err = catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := cat.Range("ads", w0, w0+3600*sec)
	if got := []int64{v2[0].Ref().Version(), v2[1].Ref().Version(), v2[2].Ref().Version()}; !reflect.DeepEqual(got, []int64{2, 2, 2}) {
		t.Fatalf("versions after the changes: %v", got)
	}
	if old, _ := cat.RangeAt("ads", w0, w0+3600*sec, s1); !reflect.DeepEqual(noSeqs(old), noSeqs(v1)) {
		t.Fatalf("the snapshot before the changes reads other versions")
	}
	a, b, cc := v2[0], v2[1], v2[2]
	for _, m := range v2 {
		if m.Key != block.RawKey("ads", blockref.New(m.ID, 2)) || len(m.Changes) != 1 || m.Changes[0].Version != 2 {
			t.Fatalf("version %s: key %s, changes %+v", m.ID, m.Key, m.Changes)
		}
		if ch := m.Changes[0]; ch.First != 260 || ch.Last != 264 || ch.Topic != "raw.ads" {
			t.Errorf("version of %s made by offsets %d-%d, want 260-264 (the change records applied)", m.ID, ch.First, ch.Last)
		}
	}
	label := []string{"click", "conversion"}
	if b.InputVersion([]string{"query", "ad_title", "event_time"}) != 1 || b.InputVersion(label) != 2 ||
		!reflect.DeepEqual(b.Changes[0].Columns, label) || b.Changes[0].UpdatedRows != 1 {
		t.Errorf("a label update: column versions %v, change %+v", b.ColumnVersions, b.Changes[0])
	}
	if a.InputVersion([]string{"query"}) != 2 || a.Rows != 99 || a.Changes[0].DeletedRows != 1 || a.Changes[0].UpdatedRows != 1 {
		t.Errorf("a delete: column versions %v, rows %d, change %+v", a.ColumnVersions, a.Rows, a.Changes[0])
	}
	if cc.InputVersion([]string{"query"}) != 2 || cc.Rows != 51 || cc.Changes[0].LateRows != 1 {
		t.Errorf("a late event: column versions %v, rows %d, change %+v", cc.ColumnVersions, cc.Rows, cc.Changes[0])
	}
	va, vb, vc := readValues(t, e, a), readValues(t, e, b), readValues(t, e, cc)
	if _, ok := va[7]; ok || va[5] != [2]int64{0, 1} || va[6] != [2]int64{0, 0} || len(va) != 99 {
		t.Errorf("block a at version 2: event 7 %v, event 5 %v, %d events", va[7], va[5], len(va))
	}
	if vb[150] != [2]int64{1, 1} || vb[151] != [2]int64{0, 0} {
		t.Errorf("block b at version 2: event 150 %v", vb[150])
	}
	if vc[300] != [2]int64{1, 0} || len(vc) != 51 {
		t.Errorf("block c at version 2: late event 300 %v, %d events", vc[300], len(vc))
	}
	// Version 1 objects are untouched.
	if old := readValues(t, e, v1[0]); old[5] != [2]int64{0, 0} || len(old) != 100 {
		t.Errorf("version 1 of block a changed: event 5 %v, %d events", old[5], len(old))
	}
	cat.Close()

	// A second label update of event 5: version 3 of block a; the restart
	// before it re-applied nothing.
	c.change("update", 5, w0+5*sec, `,"conversion":0`)
	c.send(t, e)
	stop = runIngester(t, e, mod)
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	if st := stop(); st.Versions != 1 || st.VersionsUpdate != 1 || st.Skipped == 0 && st.Records > 1 {
		t.Fatalf("stats of the third run %+v", st)
	}
	cat, err = catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	a3, err := cat.Get("ads", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a3.Ref().Version() != 3 || a3.ColumnVersion("conversion") != 3 || a3.ColumnVersion("click") != 2 || len(a3.Changes) != 2 {
		t.Fatalf("block a at version 3: column versions %v, changes %+v", a3.ColumnVersions, a3.Changes)
	}
	if v := readValues(t, e, a3); v[5] != [2]int64{0, 0} {
		t.Fatalf("event 5 at version 3: %v", v[5])
	}
	cur, _ := cat.Blocks("ads")
	cat.Close()

	// The bucket alone rebuilds every version.
	rebuilt, rep, err := catalog.Rebuild(context.Background(), e.store, filepath.Join(t.TempDir(), "rebuilt"))
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	got, _ := rebuilt.Blocks("ads")
	if !reflect.DeepEqual(noSeqs(got), noSeqs(cur)) || rep.Versions != 4 || len(rep.Superseded) != 0 {
		t.Fatalf("rebuilt: %d blocks, report %+v", len(got), rep)
	}
	dls := e.deadLetters(t, 3)
	for i, want := range []string{ingest.ReasonUnknownEvent, ingest.ReasonUnknownEvent, record.ReasonKind} {
		if code := dls[i][ingest.HeaderDLQReasonCode]; code != want {
			t.Errorf("dead letter %d: %s (%s), want %s", i, code, dls[i][ingest.HeaderDLQReason], want)
		}
	}
}

func noSeqs(ms []block.Meta) []block.Meta {
	out := make([]block.Meta, len(ms))
	for i, m := range ms {
		m.Seq = 0
		out[i] = m
	}
	return out
}

// TestIngestCollectsSupersededVersions: ingestion's GC removes the versions
// superseded that neither a pin nor "now" sees, catalog entry and object,
// and keeps a pinned one until it is unpinned.
func TestIngestCollectsSupersededVersions(t *testing.T) {
	e := newEnv(t, 1)
	mod := func(c *ingest.Config) { c.GCInterval, c.GCGrace = 50*time.Millisecond, -1 }
	sec := int64(time.Second / time.Microsecond)
	c := newChangeRecords()
	for id := int64(1); id <= 50; id++ {
		c.event(id, w0+id*sec)
	}
	c.event(1000, w0+2*3600*sec) // closes window w0
	c.send(t, e)
	run := func() ingest.Stats {
		t.Helper()
		stop := runIngester(t, e, mod)
		e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
		time.Sleep(300 * time.Millisecond) // a few GC rounds
		return stop()
	}
	withCatalog := func(fn func(*catalog.Catalog)) {
		t.Helper()
		cat, err := catalog.Open(e.catalogDir)
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		fn(cat)
	}
	run()
	var a block.Meta
	withCatalog(func(cat *catalog.Catalog) {
		bs, _ := cat.Range("ads", w0, w0+3600*sec)
		a = bs[0]
		if _, err := cat.Pin("epoch-1", 0); err != nil {
			t.Fatal(err)
		}
	})
	for _, conv := range []int{1, 0} {
		c.change("update", 5, w0+5*sec, fmt.Sprintf(`,"conversion":%d`, conv))
		c.send(t, e)
		run()
	}
	exists := func(v int64) bool {
		_, err := e.store.Stat(context.Background(), block.RawKey("ads", blockref.New(a.ID, v)))
		return err == nil
	}
	withCatalog(func(cat *catalog.Catalog) {
		vs, _ := cat.Versions("ads", a.ID)
		if !reflect.DeepEqual(versionNumbers(vs), []int64{1, 3}) || !exists(1) || exists(2) || !exists(3) {
			t.Fatalf("versions %v, objects of 1, 2, 3: %v %v %v; want 2 collected, 1 pinned", versionNumbers(vs), exists(1), exists(2), exists(3))
		}
		if err := cat.Unpin("epoch-1"); err != nil {
			t.Fatal(err)
		}
	})
	if st := run(); st.VersionsCollected != 1 {
		t.Fatalf("stats after unpinning %+v", st)
	}
	withCatalog(func(cat *catalog.Catalog) {
		vs, _ := cat.Versions("ads", a.ID)
		if !reflect.DeepEqual(versionNumbers(vs), []int64{3}) || exists(1) || !exists(3) {
			t.Fatalf("after unpinning: versions %v, objects of 1, 3: %v %v", versionNumbers(vs), exists(1), exists(3))
		}
	})
}

func versionNumbers(ms []block.Meta) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, m.Ref().Version())
	}
	return out
}

// TestChangesInAnOpenWindow: a buffer of a window still open holds new
// events and changes of a block sealed before (by RowsPerBlock) and of its
// own events: it seals as a new block with its own changes applied and a
// new version of the sealed block, catalogued together, over the same span.
func TestChangesInAnOpenWindow(t *testing.T) {
	e := newEnv(t, 1)
	sec := int64(time.Second / time.Microsecond)
	c := newChangeRecords()
	for id := int64(1); id <= 150; id++ {
		c.event(id, w0+id*sec)
	}
	c.change("update", 5, w0+5*sec, `,"conversion":1`)     // in the sealed block
	c.change("update", 120, w0+120*sec, `,"conversion":1`) // in the buffer
	c.change("delete", 130, w0+130*sec, "")                // in the buffer
	for id := int64(151); id <= 160; id++ {
		c.event(id, w0+id*sec)
	}
	c.send(t, e)
	stop := runIngester(t, e, func(c *ingest.Config) { c.RowsPerBlock = 100 })
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	st := stop()
	if st.Blocks != 2 || st.Versions != 1 || st.VersionsUpdate != 1 || st.UpdatedRows != 1 || st.DeletedRows != 0 || st.DeadLetters != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Read before Open: opening may flush what the WAL holds.
	batches := catalogBatches(t, e.catalogDir)
	cat, err := catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := cat.Range("ads", w0, w0+3600*sec)
	if len(bs) != 2 || bs[0].Ref().Version() != 2 || bs[1].Ref().Version() != 1 {
		t.Fatalf("blocks %v versions %v", ids(bs), versionNumbers(bs))
	}
	a, nb := bs[0], bs[1]
	ch := a.Changes[0]
	if ch.First != nb.Kafka.First || ch.Last != nb.Kafka.Last || nb.Kafka.First != 100 || nb.Kafka.Last != 162 ||
		!reflect.DeepEqual(ch.Columns, []string{"conversion"}) || a.InputVersion([]string{"click", "query"}) != 1 {
		t.Fatalf("version %+v of %s, new block's range %+v", ch, a.ID, *nb.Kafka)
	}
	// Adjacent sequence numbers would not tell: two commits in a row get
	// them too. The batch that catalogued the new block must hold the
	// version.
	together := false
	for _, bt := range batches {
		if bt[nb.ID] == 1 {
			together = bt[a.ID] == 2
			break
		}
	}
	if !together {
		t.Errorf("the new block %s and version 2 of %s were not one catalog commit: the batches' blocks %v", nb.ID, a.ID, batches)
	}
	va, vn := readValues(t, e, a), readValues(t, e, nb)
	if va[5] != [2]int64{0, 1} || len(va) != 100 {
		t.Errorf("version 2 of the sealed block: event 5 %v, %d events", va[5], len(va))
	}
	if _, ok := vn[130]; ok || vn[120] != [2]int64{0, 1} || vn[121] != [2]int64{0, 0} || len(vn) != 59 {
		t.Errorf("new block: event 130 there %v, event 120 %v, %d events", ok, vn[120], len(vn))
	}
	cat.Close()
	verifyExactlyOnceExcept(t, e.store, e.catalogDir, 1, 160, map[int64]bool{130: true})
}

func ids(ms []block.Meta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// catalogBatches returns the blocks each write batch of the closed catalog
// in dir set, as block id -> version, in the order written. One
// catalog.Commit is one Pebble batch, one record of the WAL, and nothing
// else the catalog offers can tell one commit from two: sequence numbers
// are consecutive either way, and every snapshot Snapshot could have
// returned is gone. It reads the b\x00<source>\x00<block id> keys of the
// catalog's documented layout (catalog/doc.go). A catalog whose memtable
// was flushed has left the WAL; a test's few commits are far below its
// size, and a block missing from every batch fails the check that looks
// for it rather than passing it.
func catalogBatches(t *testing.T, dir string) []map[string]int64 {
	t.Helper()
	logs, err := wal.Scan(wal.Dir{FS: vfs.Default, Dirname: dir})
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]int64
	for _, ll := range logs {
		r := ll.OpenForRead()
		for {
			rec, _, err := r.NextRecord()
			if err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("catalog WAL %s: %v", ll, err)
			}
			repr, err := io.ReadAll(rec)
			if err != nil {
				t.Fatalf("catalog WAL %s: %v", ll, err)
			}
			blocks := map[string]int64{}
			br := batchrepr.Read(repr)
			for {
				kind, k, v, ok, err := br.Next()
				if err != nil {
					t.Fatalf("catalog WAL %s: %v", ll, err)
				}
				if !ok {
					break
				}
				id, isBlock := bytes.CutPrefix(k, []byte("b\x00ads\x00"))
				if !isBlock || kind.String() != "SET" {
					continue
				}
				var m block.Meta
				if err := json.Unmarshal(v, &m); err != nil {
					t.Fatalf("catalog WAL: block %q: %v", id, err)
				}
				blocks[string(id)] = m.Ref().Version()
			}
			if len(blocks) > 0 {
				out = append(out, blocks)
			}
		}
		r.Close()
	}
	return out
}
