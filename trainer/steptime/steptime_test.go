package steptime

import (
	"testing"
	"time"
)

func TestStepSerializedAndPipelined(t *testing.T) {
	m := Model{Chip: Chip{PeakFLOPS: 1e9, HBMBandwidth: 4e6, SparseCoresPerChip: 2, AccessGranularity: 64}, Chips: 2}
	// 4e6 FLOPs over 2 chips at 1e9: 2 ms. SparseCore 1 moves 2000 bytes at
	// 4e6/2 = 2e6 B/s: 1 ms (the busiest SparseCore decides).
	w := Work{FLOPs: 4e6, SparseCoreBytes: []float64{1000, 2000, 0, 500}}
	got := m.Step(w)
	want := Time{TensorCore: 2 * time.Millisecond, SparseCore: time.Millisecond, Device: 3 * time.Millisecond, Ideal: 2 * time.Millisecond}
	if got != want {
		t.Fatalf("serialized: got %+v, want %+v", got, want)
	}
	m.Mode = Pipelined
	got = m.Step(w)
	want.Device = 2 * time.Millisecond
	if got != want {
		t.Fatalf("pipelined: got %+v, want %+v", got, want)
	}
	// SparseCore-bound: pipelining hides the TensorCore, ideal stays the
	// TensorCore time so PG < 1.
	w.SparseCoreBytes[1] = 20000
	got = m.Step(w)
	if got.Device != 10*time.Millisecond || got.Ideal != 2*time.Millisecond {
		t.Fatalf("sparsecore-bound pipelined: %+v", got)
	}
}

func TestRowAccessBytesRoundsToGranularity(t *testing.T) {
	m := Model{Chip: Chip{AccessGranularity: 64}}
	for _, c := range []struct {
		width int
		want  float64
	}{{1, 192}, {16, 192}, {17, 384}, {32, 384}} {
		if got := m.RowAccessBytes(c.width, 4); got != c.want {
			t.Errorf("width %d: got %v, want %v", c.width, got, c.want)
		}
	}
}

func TestScaleAndDefaults(t *testing.T) {
	m := Model{TimeScale: 1000}
	if got := m.Scale(time.Microsecond); got != time.Millisecond {
		t.Fatalf("scale: %v", got)
	}
	m.EnsureDefaults()
	if m.PeakFLOPS != DefaultPeakFLOPS || m.Chips != 1 || m.SparseCores() != 4 {
		t.Fatalf("defaults: %+v", m)
	}
	if (Model{}).Step(Work{}).Device != 0 {
		t.Fatal("empty work takes time")
	}
	if _, err := ParseMode("bogus"); err == nil {
		t.Fatal("bogus mode accepted")
	}
}
