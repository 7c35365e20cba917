package goodput

import (
	"testing"
	"time"
)

// BenchmarkRecorderStep is the per-step cost the trainer pays: one Step call,
// merged into the current productive interval.
func BenchmarkRecorderStep(b *testing.B) {
	rec := NewRecorder(8, at(0))
	j := rec.Job("a")
	if err := j.Allocate(at(0), 8, 8); err != nil {
		b.Fatal(err)
	}
	t := at(0)
	for b.Loop() {
		next := t.Add(time.Millisecond)
		if err := j.Step(t, next, time.Millisecond/2); err != nil {
			b.Fatal(err)
		}
		t = next
	}
}

// BenchmarkCompute is a scrape or an exit report: 16 jobs, each with 1000
// checkpointed stretches of steps.
func BenchmarkCompute(b *testing.B) {
	rec := NewRecorder(64, at(0))
	for i := range 16 {
		j := rec.Job(string(rune('a' + i)))
		if err := j.Allocate(at(0), 4, 4); err != nil {
			b.Fatal(err)
		}
		for s := range 1000 {
			if err := j.Step(at(float64(2*s)), at(float64(2*s+1)), time.Second/2); err != nil {
				b.Fatal(err)
			}
			if err := j.Begin(at(float64(2*s+1)), CheckpointSave); err != nil {
				b.Fatal(err)
			}
			if err := j.End(at(float64(2*s + 2))); err != nil {
				b.Fatal(err)
			}
			if err := j.CheckpointCommitted(at(float64(2*s + 2))); err != nil {
				b.Fatal(err)
			}
		}
	}
	tl := rec.Timeline(at(2000))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Compute(tl); err != nil {
			b.Fatal(err)
		}
	}
}
