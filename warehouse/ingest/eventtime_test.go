package ingest_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

// streamClock is the wall clock moved back to a point in the generated
// stream, so that the stream is live: its events arrive as they happen.
type streamClock struct{ offset time.Duration }

func (c streamClock) Now() time.Time                         { return time.Now().Add(-c.offset) }
func (c streamClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Records whose event_time is outside the valid range or too far ahead of
// the ingester's clock go to the dead-letter topic with the reason, and no
// record moves a partition's watermark past the clock: an in-order stream
// after them, and after a restart that restores the watermark from the
// catalog, forms no late block.
func TestEventTimeBounds(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The ingester's present is 00:40 of the stream (and moves on).
	clk := streamClock{offset: time.Since(start.Add(40 * time.Minute))}
	cl, err := e.kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	enc, _ := record.NewEncoder(transform.AdsSchema(), record.ContentTypeRow)
	hdr := []kgo.RecordHeader{{Key: record.HeaderContentType, Value: []byte(record.ContentTypeRow)}}
	send := func(ev gen.Event) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "raw.ads", Value: ev.Encode(enc), Headers: hdr}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// 10 events a second from 00:00, none late: 3000 events are 5 minutes.
	g := gen.New(gen.Config{Seed: 3, Start: start, EventsPerSecond: 10, LateFraction: -1})
	sendN := func(n int) {
		for range n {
			send(g.Next())
		}
	}
	bad := gen.New(gen.Config{Seed: 4, Start: start, FirstEventID: 1_000_000})
	badAt := func(t int64) {
		ev := bad.Next()
		ev.EventTime = t
		send(ev)
	}
	sendN(3000)
	badAt(math.MaxInt64)
	badAt(math.MinInt64)
	badAt(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	badAt(-1)
	badAt(transform.EndEventTime - 1)               // in range, but millennia ahead
	badAt(clk.Now().Add(3 * time.Hour).UnixMicro()) // ahead of the clock by more than 1h
	// Accepted: 30 minutes ahead of the clock (skew within the hour), in
	// the window of 01:00; it must not close the window of 00:00.
	ev := g.Next()
	ev.EventTime = clk.Now().Add(30 * time.Minute).UnixMicro()
	send(ev)
	sendN(3000)

	stop := runIngester(t, e, func(c *ingest.Config) { c.RowsPerBlock = 2000; c.Clock = clk })
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	st := stop()
	if st.DeadLetters != 6 || st.LateBlocks != 0 {
		t.Fatalf("stats %+v: want 6 dead letters and no late block", st)
	}
	want := []string{"the end of the event times SIG stores", "the earliest SIG stores", "the end of the event times SIG stores", "the earliest SIG stores",
		"ahead of the ingester's clock", "ahead of the ingester's clock"}
	for i, h := range e.deadLetters(t, len(want)) {
		if r := h[ingest.HeaderDLQReason]; !strings.Contains(r, want[i]) || !strings.Contains(r, "event_time") {
			t.Errorf("dead letter %d: reason %q, want it to mention %q", i, r, want[i])
		}
		code := ingest.ReasonEventTimeRange
		if i >= 4 {
			code = ingest.ReasonEventTimeAhead
		}
		if h[ingest.HeaderDLQReasonCode] != code {
			t.Errorf("dead letter %d: reason code %q, want %q", i, h[ingest.HeaderDLQReasonCode], code)
		}
	}

	// A restart restores the watermark from the catalog (which holds the
	// 01:10 event): in-order events after it are still not late.
	sendN(3000)
	stop = runIngester(t, e, func(c *ingest.Config) { c.RowsPerBlock = 2000; c.Clock = clk })
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	if st := stop(); st.LateBlocks != 0 || st.DeadLetters != 0 {
		t.Fatalf("after the restart: stats %+v, want no late block", st)
	}
	for _, m := range verifyExactlyOnce(t, e.store, e.catalogDir, 1, 9001) {
		if m.Late {
			t.Errorf("block %s is late", m.ID)
		}
	}
}
