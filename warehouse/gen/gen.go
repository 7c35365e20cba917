package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/record"
)

// Config configures a Generator. Zero fields take defaults (EnsureDefaults).
type Config struct {
	// Seed selects the event sequence.
	Seed uint64
	// Start is the event time of the first event. Default 2026-01-01 UTC.
	Start time.Time
	// EventsPerSecond is how fast event time advances. Default 100, so
	// one million events span about 2.8 hours (three hourly windows).
	EventsPerSecond float64
	// LateFraction of events get an event time 1-3 hours in the past.
	// Default 0.001; negative means none.
	LateFraction float64
	// FirstEventID is the id of the first event. Default 1.
	FirstEventID int64
	// VocabSize, Advertisers, Categories size the vocabularies.
	// Defaults 5000, 2000, 30 (at most len(categoryNames) categories).
	VocabSize, Advertisers, Categories int
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.EventsPerSecond <= 0 {
		c.EventsPerSecond = 100
	}
	if c.LateFraction == 0 {
		c.LateFraction = 0.001
	}
	if c.LateFraction < 0 {
		c.LateFraction = 0
	}
	if c.FirstEventID == 0 {
		c.FirstEventID = 1
	}
	if c.VocabSize <= 0 {
		c.VocabSize = 5000
	}
	if c.Advertisers <= 0 {
		c.Advertisers = 2000
	}
	if c.Categories <= 0 || c.Categories > len(categoryNames) {
		c.Categories = len(categoryNames)
	}
}

var categoryNames = []string{
	"apparel", "electronics", "travel", "finance", "autos", "home", "garden", "beauty",
	"sports", "toys", "books", "music", "games", "health", "pets", "food", "jobs",
	"education", "realestate", "insurance", "software", "phones", "furniture",
	"jewelry", "baby", "office", "tools", "outdoor", "movies", "crafts",
}

var countries = []string{"us", "in", "br", "gb", "de", "fr", "jp", "mx", "ca", "it",
	"es", "au", "id", "tr", "kr", "nl", "pl", "ar", "se", "ch"}

var devices = []struct {
	name   string
	share  float64
	effect float64
}{{"mobile", 0.6, 0.2}, {"desktop", 0.3, 0}, {"tablet", 0.1, -0.15}}

// Event is one Ads event (transform.AdsSchema, in column order).
type Event struct {
	EventID      int64
	EventTime    int64 // microseconds since the epoch
	Query        string
	AdTitle      string
	AdCategory   string
	AdvertiserID int64
	Country      string
	Device       string
	BidPrice     float64
	Click        int64
	Conversion   int64
}

// Generator produces a deterministic sequence of events.
type Generator struct {
	cfg        Config
	r          *rand.Rand
	vocab      []string
	words      *rand.Zipf
	cats       *rand.Zipf
	advs       *rand.Zipf
	ctry       *rand.Zipf
	catEffect  []float64
	convEffect []float64
	catPrice   []float64
	n          int64
	qbuf       []string
}

// New returns a generator for cfg.
func New(cfg Config) *Generator {
	cfg.EnsureDefaults()
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5167))
	g := &Generator{cfg: cfg, r: r}
	g.vocab = makeVocab(rand.New(rand.NewPCG(cfg.Seed, 0x766f63)), cfg.VocabSize)
	g.words = rand.NewZipf(r, 1.07, 2, uint64(cfg.VocabSize-1))
	g.cats = rand.NewZipf(r, 1.2, 1, uint64(cfg.Categories-1))
	g.advs = rand.NewZipf(r, 1.1, 1, uint64(cfg.Advertisers-1))
	g.ctry = rand.NewZipf(r, 1.3, 1, uint64(len(countries)-1))
	pr := rand.New(rand.NewPCG(cfg.Seed, 0x636174))
	for range cfg.Categories {
		g.catEffect = append(g.catEffect, pr.NormFloat64()*0.7)
		g.convEffect = append(g.convEffect, pr.NormFloat64()*0.5)
		g.catPrice = append(g.catPrice, math.Exp(pr.NormFloat64()*0.6-1))
	}
	return g
}

// makeVocab makes n distinct pronounceable pseudo-words.
func makeVocab(r *rand.Rand, n int) []string {
	const cons, vows = "bcdfghjklmnprstvz", "aeiou"
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	var sb strings.Builder
	for len(out) < n {
		sb.Reset()
		for range 1 + r.IntN(3) {
			sb.WriteByte(cons[r.IntN(len(cons))])
			sb.WriteByte(vows[r.IntN(len(vows))])
			if r.IntN(3) == 0 {
				sb.WriteByte(cons[r.IntN(len(cons))])
			}
		}
		w := sb.String()
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// ClickProbability is the model the click labels are drawn from, exposed so
// that tests and demos can compare a trained model with the truth.
func (g *Generator) ClickProbability(overlap float64, category int, device int, price float64) float64 {
	return sigmoid(-2.6 + 3.0*overlap + g.catEffect[category] + devices[device].effect + 0.25*math.Log(price))
}

// Next returns the next event.
func (g *Generator) Next() Event {
	r := g.r
	i := g.n
	g.n++
	ev := Event{EventID: g.cfg.FirstEventID + i}
	t := g.cfg.Start.UnixMicro() + int64(float64(i)*1e6/g.cfg.EventsPerSecond)
	if g.cfg.LateFraction > 0 && r.Float64() < g.cfg.LateFraction {
		t -= int64(3600e6 + r.Float64()*7200e6)
	}
	ev.EventTime = t

	// Query: 1-4 Zipf words.
	q := g.qbuf[:0]
	for range 1 + r.IntN(4) {
		q = append(q, g.vocab[g.words.Uint64()])
	}
	g.qbuf = q
	ev.Query = strings.Join(q, " ")
	// Title: 3-8 words; a relevant ad reuses some query words.
	nt := 3 + r.IntN(6)
	title := make([]string, 0, nt)
	if r.IntN(2) == 0 {
		for _, w := range q {
			if r.IntN(3) > 0 && len(title) < nt {
				title = append(title, w)
			}
		}
	}
	for len(title) < nt {
		title = append(title, g.vocab[g.words.Uint64()])
	}
	r.Shuffle(len(title), func(a, b int) { title[a], title[b] = title[b], title[a] })
	if len(title) > 0 {
		title[0] = strings.ToUpper(title[0][:1]) + title[0][1:]
	}
	ev.AdTitle = strings.Join(title, " ")

	cat := int(g.cats.Uint64())
	ev.AdCategory = categoryNames[cat]
	ev.AdvertiserID = 1000 + int64(g.advs.Uint64())
	ev.Country = countries[g.ctry.Uint64()]
	u := r.Float64()
	dev := 0
	for acc := 0.0; dev < len(devices)-1; dev++ {
		acc += devices[dev].share
		if u < acc {
			break
		}
	}
	ev.Device = devices[dev].name
	ev.BidPrice = math.Round(g.catPrice[cat]*math.Exp(r.NormFloat64()*0.5)*1e4) / 1e4
	if ev.BidPrice < 0.0001 {
		ev.BidPrice = 0.0001
	}

	overlap := queryTitleOverlap(q, title)
	if r.Float64() < g.ClickProbability(overlap, cat, dev, ev.BidPrice) {
		ev.Click = 1
		if r.Float64() < sigmoid(-1.5+1.5*overlap+g.convEffect[cat]) {
			ev.Conversion = 1
		}
	}
	return ev
}

// queryTitleOverlap is the fraction of distinct query words found in the
// title (case-insensitive, as lower+unigrams would see them).
func queryTitleOverlap(q, title []string) float64 {
	distinct, hit := 0, 0
	for i, w := range q {
		dup := false
		for _, p := range q[:i] {
			if p == w {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		distinct++
		for _, t := range title {
			if strings.EqualFold(t, w) {
				hit++
				break
			}
		}
	}
	if distinct == 0 {
		return 0
	}
	return float64(hit) / float64(distinct)
}

// Encode writes ev with enc (whose schema must be transform.AdsSchema) and
// returns the record value.
func (ev *Event) Encode(enc *record.Encoder) []byte {
	enc.Begin()
	enc.Int64(ev.EventID)
	enc.Int64(ev.EventTime)
	enc.String(ev.Query)
	enc.String(ev.AdTitle)
	enc.String(ev.AdCategory)
	enc.Int64(ev.AdvertiserID)
	enc.String(ev.Country)
	enc.String(ev.Device)
	enc.Float64(ev.BidPrice)
	enc.Int64(ev.Click)
	enc.Int64(ev.Conversion)
	return enc.Bytes()
}

// AppendTo appends ev to a builder of transform.AdsSchema().Arrow().
func (ev *Event) AppendTo(b *array.RecordBuilder) {
	b.Field(0).(*array.Int64Builder).Append(ev.EventID)
	b.Field(1).(*array.Int64Builder).Append(ev.EventTime)
	b.Field(2).(*array.StringBuilder).Append(ev.Query)
	b.Field(3).(*array.StringBuilder).Append(ev.AdTitle)
	b.Field(4).(*array.StringBuilder).Append(ev.AdCategory)
	b.Field(5).(*array.Int64Builder).Append(ev.AdvertiserID)
	b.Field(6).(*array.StringBuilder).Append(ev.Country)
	b.Field(7).(*array.StringBuilder).Append(ev.Device)
	b.Field(8).(*array.Float64Builder).Append(ev.BidPrice)
	b.Field(9).(*array.Int64Builder).Append(ev.Click)
	b.Field(10).(*array.Int64Builder).Append(ev.Conversion)
}

// Records returns the next n events as Arrow records of at most batch rows.
func (g *Generator) Records(n, batch int) []arrow.Record {
	if batch <= 0 {
		batch = 64 << 10
	}
	sch := transform.AdsSchema().Arrow()
	var out []arrow.Record
	for n > 0 {
		k := min(n, batch)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for range k {
			ev := g.Next()
			ev.AppendTo(b)
		}
		out = append(out, b.NewRecord())
		b.Release()
		n -= k
	}
	return out
}

// WriteFile writes the next n events to an Arrow IPC file at path.
func (g *Generator) WriteFile(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(transform.AdsSchema().Arrow()))
	if err != nil {
		f.Close()
		return err
	}
	for n > 0 {
		k := min(n, 64<<10)
		recs := g.Records(k, k)
		for _, rec := range recs {
			err = w.Write(rec)
			rec.Release()
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("gen: write %s: %w", path, err)
		}
		n -= k
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Produce sends the next n events to topic, encoded as contentType
// (record.ContentTypeRow or record.ContentTypeJSON), keyed by event id, and
// waits until every record is acknowledged.
func (g *Generator) Produce(ctx context.Context, cl *kgo.Client, topic string, n int, contentType string) error {
	enc, err := record.NewEncoder(transform.AdsSchema(), contentType)
	if err != nil {
		return err
	}
	hdr := []kgo.RecordHeader{{Key: record.HeaderContentType, Value: []byte(contentType)}}
	errc := make(chan error, 1)
	for range n {
		ev := g.Next()
		rec := &kgo.Record{Topic: topic, Key: strconv.AppendInt(nil, ev.EventID, 10), Value: ev.Encode(enc), Headers: hdr}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
		select {
		case err := <-errc:
			return fmt.Errorf("gen: produce to %s: %w", topic, err)
		default:
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("gen: produce to %s: %w", topic, err)
	default:
	}
	return nil
}

// UpdateRecord is a Kafka record that overwrites columns of the stored event
// ev (kind update, JSON, keyed by event id as Produce keys events, so it
// lands on the event's partition): values maps column names to their new
// values (JSON-encodable; nil is null). event_id and event_time name the
// event and cannot be updated.
func UpdateRecord(topic string, ev Event, values map[string]any) (*kgo.Record, error) {
	if len(values) == 0 {
		return nil, fmt.Errorf("gen: an update of event %d names no column", ev.EventID)
	}
	m := map[string]any{transform.ColEventID: ev.EventID, transform.ColEventTime: ev.EventTime}
	for k, v := range values {
		if k == transform.ColEventID || k == transform.ColEventTime {
			return nil, fmt.Errorf("gen: %s names the event and cannot be updated", k)
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("gen: update of event %d: %w", ev.EventID, err)
	}
	return changeRecord(topic, ev, record.KindUpdate, b), nil
}

// DeleteRecord is a Kafka record that removes the stored event ev (kind
// delete, JSON, keyed as Produce keys events).
func DeleteRecord(topic string, ev Event) *kgo.Record {
	b := fmt.Appendf(nil, `{"%s":%d,"%s":%d}`, transform.ColEventID, ev.EventID, transform.ColEventTime, ev.EventTime)
	return changeRecord(topic, ev, record.KindDelete, b)
}

func changeRecord(topic string, ev Event, k record.Kind, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: strconv.AppendInt(nil, ev.EventID, 10), Value: value,
		Headers: []kgo.RecordHeader{{Key: record.HeaderKind, Value: []byte(k.String())},
			{Key: record.HeaderContentType, Value: []byte(record.ContentTypeJSON)}}}
}
