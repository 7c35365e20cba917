package gen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/record"
)

func TestDeterministic(t *testing.T) {
	a, b, c := gen.New(gen.Config{Seed: 1}), gen.New(gen.Config{Seed: 1}), gen.New(gen.Config{Seed: 2})
	same := 0
	for i := range 1000 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("event %d differs for the same seed", i)
		}
		if x.EventID != int64(i+1) {
			t.Fatalf("event id %d at %d", x.EventID, i)
		}
		if x.Query == z.Query {
			same++
		}
	}
	if same > 300 {
		t.Fatalf("seeds 1 and 2 share %d of 1000 queries", same)
	}
}

func TestEventsDecodeAndLabelsDependOnFeatures(t *testing.T) {
	g := gen.New(gen.Config{Seed: 7})
	s := transform.AdsSchema()
	row, _ := record.NewEncoder(s, record.ContentTypeRow)
	js, _ := record.NewEncoder(s, record.ContentTypeJSON)
	dec := record.NewDecoder(s, 0)
	var clicksHi, nHi, clicksLo, nLo, late int
	words := map[string]int{}
	cats := map[string]int{}
	const n = 100_000
	start := int64(1767225600000000)
	for i := range n {
		ev := g.Next()
		if i < 2000 {
			for _, enc := range []*record.Encoder{row, js} {
				if err := dec.Decode(enc.ContentType(), ev.Encode(enc)); err != nil {
					t.Fatalf("event %d as %s: %v", i, enc.ContentType(), err)
				}
				if dec.EventID() != ev.EventID || dec.EventTime() != ev.EventTime {
					t.Fatal("decoded id/time differ")
				}
			}
		}
		if ev.EventTime < start+int64(i)*10000-3600e6+1 {
			late++
		}
		q := strings.Fields(ev.Query)
		title := strings.Fields(strings.ToLower(ev.AdTitle))
		hit := 0
		for _, w := range q {
			words[w]++
			for _, tw := range title {
				if tw == w {
					hit++
					break
				}
			}
		}
		cats[ev.AdCategory]++
		if ev.Conversion == 1 && ev.Click == 0 {
			t.Fatal("conversion without click")
		}
		if hit == len(q) {
			nHi++
			clicksHi += int(ev.Click)
		} else if hit == 0 {
			nLo++
			clicksLo += int(ev.Click)
		}
	}
	ctrHi, ctrLo := float64(clicksHi)/float64(nHi), float64(clicksLo)/float64(nLo)
	t.Logf("CTR full overlap %.3f (%d), no overlap %.3f (%d), late %d", ctrHi, nHi, ctrLo, nLo, late)
	if ctrHi < 3*ctrLo {
		t.Fatalf("clicks do not depend on query-title overlap: %.3f vs %.3f", ctrHi, ctrLo)
	}
	if late < n/2000 || late > n/200 {
		t.Fatalf("%d late events of %d", late, n)
	}
	freq := make([]int, 0, len(words))
	for _, c := range words {
		freq = append(freq, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(freq)))
	if freq[0] < 50*freq[len(freq)/2] {
		t.Fatalf("word frequencies not Zipf-like: top %d, median %d", freq[0], freq[len(freq)/2])
	}
	if len(cats) < 10 {
		t.Fatalf("%d categories", len(cats))
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.arrow")
	if err := gen.New(gen.Config{Seed: 3}).WriteFile(path, 70_000); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Schema().Equal(transform.AdsSchema().Arrow()) {
		t.Fatalf("schema %v", r.Schema())
	}
	rows := int64(0)
	for i := range r.NumRecords() {
		rec, err := r.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		rows += rec.NumRows()
	}
	if rows != 70_000 {
		t.Fatalf("%d rows", rows)
	}
}

// TestChangeRecords: the update and delete records decode as their kinds,
// keyed like the event.
func TestChangeRecords(t *testing.T) {
	ev := gen.New(gen.Config{Seed: 4}).Next()
	up, err := gen.UpdateRecord("raw.ads", ev, map[string]any{"conversion": 1, "query": nil})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.UpdateRecord("raw.ads", ev, map[string]any{"event_time": 1}); err == nil {
		t.Fatal("an update of event_time was made")
	}
	d := record.NewDecoder(transform.AdsSchema(), 0)
	for _, r := range []struct {
		rec     *kgo.Record
		kind    record.Kind
		updated []string
	}{{up, record.KindUpdate, []string{"query", "conversion"}}, {gen.DeleteRecord("raw.ads", ev), record.KindDelete, nil}} {
		var kind, ct string
		for _, h := range r.rec.Headers {
			switch {
			case record.IsKindHeader(h.Key):
				kind = string(h.Value)
			case record.IsContentTypeHeader(h.Key):
				ct = string(h.Value)
			}
		}
		k, err := record.ParseKind(kind)
		if err == nil {
			err = d.DecodeKind(k, ct, r.rec.Value)
		}
		if err != nil || k != r.kind || d.EventID() != ev.EventID || d.EventTime() != ev.EventTime ||
			!reflect.DeepEqual(d.Updated(), r.updated) || string(r.rec.Key) != fmt.Sprint(ev.EventID) {
			t.Errorf("%s record %s: %v, updated %v", r.kind, r.rec.Value, err, d.Updated())
		}
	}
}
