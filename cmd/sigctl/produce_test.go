package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// TestIngestForeignEncodings sends the raw files of TestRunForeignEncodings
// (pyarrow wrote them: the same events of eight Ads columns with strings as utf8,
// dictionary<int32, utf8> as Arrow JS writes them, dictionary<int8> and
// <uint16>, large_utf8 and string_view) through ingestion: `sigctl
// produce` to a Kafka topic (kfake), warehouse/ingest into block objects
// on MinIO, and a worker (workers/memo) memoizing components over each
// catalogued block. The raw block objects and the memo objects are byte for
// byte those of the utf8 file. Before, no Arrow file reached ingestion
// (there was no produce command), and transform.Conform is what makes the
// dictionary file's records equal the utf8 file's.
func TestIngestForeignEncodings(t *testing.T) {
	m := devenv.NewMinIO(t)
	ctx := context.Background()
	const schemaFile = "testdata/foreign/ads_files.schema.json" // the files' columns
	s, err := transform.LoadSchema(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	schemaJSON, _ := json.Marshal(s)
	components := []struct{ dsl, column string }{
		{`input out = hash(unigrams(lower(col("query"))), buckets=1000)`, "query"},
		{`input out = unigrams(col("ad_title"))`, "ad_title"},
		{`input out = fill_missing(col("ad_category"), default="none")`, "ad_category"},
		{`input out = lower(col("country"))`, "country"},
		{`input out = cross(col("ad_category"), col("advertiser_id"), buckets=1000)`, "ad_category"},
	}
	// objects ingests file into a bucket of its own and returns every
	// raw block object and the memo objects of the components over it, in
	// block order.
	objects := func(i int, file string) (names []string, objs [][]byte) {
		k := devenv.NewKafka(t, devenv.KafkaConfig{Topics: []string{"raw.partner", "raw.partner.dlq"}, Partitions: 1})
		code, out, errOut := runSigctl(t, "produce", filepath.Join("testdata/foreign", file),
			"--kafka-brokers", strings.Join(k.Brokers, ","), "--source", "partner", "--schema", schemaFile)
		if code != 0 {
			t.Fatalf("produce %s: exit %d: %s", file, code, errOut)
		}
		var n int64
		if _, err := fmt.Sscanf(out, "produced %d events", &n); err != nil || n == 0 {
			t.Fatalf("produce %s: %q", file, out)
		}
		store := m.NewStore(t, objstore.Config{Bucket: fmt.Sprintf("wh%d", i), AttemptTimeout: 5 * time.Second})
		cat, err := catalog.Open(filepath.Join(t.TempDir(), "catalog"))
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		in, err := ingest.New(ingest.Config{Brokers: k.Brokers, Schema: s, Store: store, Catalog: cat,
			RowsPerBlock: 100, SealAfter: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- in.Run(rctx) }()
		for deadline := time.Now().Add(30 * time.Second); in.Stats().Rows < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: ingested %+v of %d events after 30s", file, in.Stats(), n)
			}
		}
		cancel()
		<-done
		if st := in.Stats(); st.Rows != n || st.DeadLetters != 0 {
			t.Fatalf("%s: ingestion stats %+v, want %d rows and no dead letters", file, st, n)
		}
		blocks, err := cat.Blocks("partner")
		if err != nil || len(blocks) < 2 {
			t.Fatalf("%s: %d blocks, %v (want several)", file, len(blocks), err)
		}
		// One pack key per block, so that the packs of two files compare
		// byte for byte (a pack's footer names its key).
		r := &memo.Runner{Store: store, PackKey: func(source string, raw blockref.Ref) string {
			return block.PackKey(source, raw, "test")
		}}
		for _, meta := range blocks {
			raw, _, err := store.Get(ctx, meta.Key)
			if err != nil {
				t.Fatal(err)
			}
			names, objs = append(names, meta.Key), append(objs, raw)
			for ci, c := range components {
				memoKey := fmt.Sprintf("memo/c%d/%s.arrow", ci, meta.ID)
				cols := []string{c.column}
				if strings.Contains(c.dsl, "advertiser_id") {
					cols = append(cols, "advertiser_id")
				}
				task := workers.Task{ID: workers.TaskID{Component: canon.Key{byte(ci)}, Block: blockref.ParseMemo(meta.ID)}, Spec: &sigv1.Task{
					ComponentKey: canon.Key{byte(ci + 1)}.String(), BlockId: meta.ID, RawSource: "partner", RawObject: meta.Key, MemoObject: memoKey,
					CanonicalDsl: c.dsl, Columns: cols, SchemaJson: string(schemaJSON), MemoGeneration: 1,
				}}
				res, err := r.Run(ctx, task)
				if err != nil {
					t.Fatalf("%s: block %s: component %d: %v", file, meta.ID, ci, err)
				}
				// The pack's key is new every run; its bytes are not.
				b, _, err := store.Get(ctx, res.Object)
				if err != nil {
					t.Fatal(err)
				}
				names, objs = append(names, memoKey), append(objs, b)
			}
		}
		return names, objs
	}
	wantNames, want := objects(0, "ads_utf8.arrow")
	for i, f := range []string{"ads_dict_int32.arrow", "ads_dict_small.arrow", "ads_large_utf8.arrow", "ads_string_view.arrow"} {
		names, got := objects(i+1, f)
		if strings.Join(names, " ") != strings.Join(wantNames, " ") {
			t.Errorf("%s: objects %v, want %v", f, names, wantNames)
			continue
		}
		for j := range got {
			if !bytes.Equal(got[j], want[j]) {
				t.Errorf("%s: object %s of %d bytes differs from the utf8 file's (%d bytes)", f, names[j], len(got[j]), len(want[j]))
			}
		}
	}
}
