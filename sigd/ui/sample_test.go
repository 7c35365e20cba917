package ui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
)

// TestQueueChartKeepsBursts: 81 tasks queued and drained between two
// samples of the overview show as 81 on the queue chart, as they did not
// when the sampler read the queue's depth every 5 s (the demo's queue chart
// stayed at 0 with 81 tasks queued). The queue is a real one on disk, wired
// to the UI as sigd wires it.
func TestQueueChartKeepsBursts(t *testing.T) {
	q, err := workers.Open(t.TempDir(), workers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	clk := clock.NewFake(time.Date(2026, 5, 9, 14, 0, 0, 0, time.UTC))
	u := New(Config{Clock: clk,
		Stats: func() (*sigv1.StatsResponse, error) {
			st := &sigv1.StatsResponse{WorkersActual: 1}
			for _, d := range q.Depths() {
				st.Queues = append(st.Queues, &sigv1.QueueDepth{Client: d.Client, Priority: d.Priority, Queued: uint32(d.Queued), Leased: uint32(d.Leased)})
			}
			return st, nil
		},
		Trainers:   func() []*sigv1.TrainerStatus { return nil },
		QueuedPeak: q.QueuedPeak,
	})

	u.sample()
	var reqs []workers.Request
	for i := 0; i < 81; i++ {
		reqs = append(reqs, workers.Request{Task: workers.TaskID{Component: canon.Key{'c'}, Block: blockref.ParseMemo(fmt.Sprint(i))}, Client: "ctr", Pipeline: "p", Priority: 1})
	}
	if _, err := q.Enqueue(reqs...); err != nil {
		t.Fatal(err)
	}
	for range reqs {
		l, ok, err := q.TryLease("w")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := q.Complete(context.Background(), l.ID, workers.Result{}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(u.cfg.SampleEvery)
	u.sample()
	clk.Advance(u.cfg.SampleEvery)
	u.sample() // an interval with nothing queued

	var got []float64
	for _, s := range u.samples {
		got = append(got, s.queued)
	}
	if fmt.Sprint(got) != "[0 81 0]" {
		t.Errorf("queued series %v, want [0 81 0]", got)
	}
	_, chart := u.charts()
	if !strings.Contains(string(chart), `max <b class="max">81</b>`) || !strings.Contains(string(chart), "queued tasks (most at once per 5s): 81") {
		t.Errorf("the queue chart does not show the burst:\n%s", chart)
	}
}
