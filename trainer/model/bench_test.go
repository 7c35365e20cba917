package model

import "testing"

// BenchmarkStep is one training step of the ctr_small model on a global
// batch of 512 generated Ads examples: the CPU cost of the emulated slice's
// step, which the default time scale must keep below the modelled device
// time.
func BenchmarkStep(b *testing.B) {
	f, ex := adsExamples(b, "ctr_small", 1, 8192)
	m, err := New(Config{Features: f})
	if err != nil {
		b.Fatal(err)
	}
	batches := make([]*Examples, 0, 16)
	for i := 0; i+512 <= ex.Len(); i += 512 {
		batches = append(batches, ex.Slice(i, i+512))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Step(batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*512)/b.Elapsed().Seconds(), "examples/s")
}
