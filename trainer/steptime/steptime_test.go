package steptime

import (
	"testing"
	"time"
)

func TestStepSerializedAndPipelined(t *testing.T) {
	m := Model{Chip: Chip{PeakFLOPS: 1e9, HBMBandwidth: 4e6, SparseCoresPerChip: 2, AccessGranularity: 64}, Chips: 2, Contention: -1}
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

// TestPipelinedContention checks device time = max + κ·min (paper VII.D:
// overlapped engines slow each other down): κ = 0.5 on 2 ms of TensorCore
// and 1 ms of SparseCore is 2.5 ms; κ = 1 equals serialized execution; the
// default is DefaultContention.
func TestPipelinedContention(t *testing.T) {
	w := Work{FLOPs: 4e6, SparseCoreBytes: []float64{2000}}
	m := Model{Chip: Chip{PeakFLOPS: 1e9, HBMBandwidth: 2e6, SparseCoresPerChip: 1}, Chips: 2, Mode: Pipelined, Contention: 0.5}
	if got := m.Step(w).Device; got != 2500*time.Microsecond {
		t.Fatalf("κ=0.5: %v", got)
	}
	m.Contention = 1
	ser := m
	ser.Mode = Serialized
	if a, b := m.Step(w).Device, ser.Step(w).Device; a != b || a != 3*time.Millisecond {
		t.Fatalf("κ=1: pipelined %v, serialized %v", a, b)
	}
	m.Contention = 0
	want := 2*time.Millisecond + time.Duration(DefaultContention*float64(time.Millisecond))
	if got := m.Step(w).Device; got != want {
		t.Fatalf("default κ: %v, want %v", got, want)
	}
}

// TestOverheads prices row slices and shards like the partitioner's cost
// model: SparseCore 0 moves 1000 bytes at 1 byte/ns and looks up 100 slices
// at 2 ns and holds 3 shards at 50 ns: 1350 ns; SparseCore 1 only holds
// 30 shards: 1500 ns, the maximum.
func TestOverheads(t *testing.T) {
	m := Model{Chip: Chip{PeakFLOPS: 1e9, HBMBandwidth: 1e9, SparseCoresPerChip: 1, LookupOverheadNS: 2, ShardOverheadNS: 50}, Chips: 2}
	w := Work{SparseCoreBytes: []float64{1000, 0}, SparseCoreLookups: []float64{100, 0}, SparseCoreShards: []int{3, 30}}
	ns := m.SparseCoreNS(w)
	if ns[0] != 1350 || ns[1] != 1500 {
		t.Fatalf("per-SparseCore ns %v", ns)
	}
	if got := m.Step(w).SparseCore; got != 1500*time.Nanosecond {
		t.Fatalf("SparseCore time %v", got)
	}
}

// TestStepOnServers: the same step with its tables on parameter servers
// (Ads paper III.B) has the same ideal time — the same FLOPs — and holds
// the slice for its TensorCore time plus the wait on the servers, which
// replaces the SparseCore's lookups and is not overlapped in either mode:
// 4 ms of TensorCore, 8000 bytes over 4e6 B/s = 2 ms, two rounds of 0.5
// ms: 7 ms. PG is ideal over that (MPG paper §4), 4/7, where the slice's
// was 4/5 serialized (1 ms of SparseCore) and 4/4 pipelined.
func TestStepOnServers(t *testing.T) {
	m := Model{Chip: Chip{PeakFLOPS: 1e9, HBMBandwidth: 4e6, SparseCoresPerChip: 1},
		Network: Network{Bandwidth: 4e6, RoundTripNS: 5e5}, Chips: 1, Contention: -1}
	slice := Work{FLOPs: 4e6, SparseCoreBytes: []float64{4000}}
	servers := Work{FLOPs: 4e6, SparseCoreBytes: []float64{0}, ServerBytes: 8000, ServerRounds: 2}
	for mode, onSlice := range map[Mode]time.Duration{Serialized: 5 * time.Millisecond, Pipelined: 4 * time.Millisecond} {
		m.Mode = mode
		a, b := m.Step(slice), m.Step(servers)
		if a.Device != onSlice || a.Servers != 0 {
			t.Errorf("%v, tables on the slice: %+v", mode, a)
		}
		want := Time{TensorCore: 4 * time.Millisecond, Servers: 3 * time.Millisecond, Device: 7 * time.Millisecond, Ideal: 4 * time.Millisecond}
		if b != want {
			t.Errorf("%v, tables on the servers: got %+v, want %+v", mode, b, want)
		}
		if a.Ideal != b.Ideal {
			t.Errorf("%v: the ideal moved with the tables: %v and %v", mode, a.Ideal, b.Ideal)
		}
	}
	if got := m.ServerRowBytes(8, 4); got != 2*8+2*32 {
		t.Errorf("a row of 8 float32 costs the network %v bytes a step", got)
	}
	var d Model
	d.EnsureDefaults()
	if d.Network.Bandwidth != DefaultNetworkBandwidth || d.Network.RoundTripNS != 0 {
		t.Errorf("network defaults %+v", d.Network)
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

// TestExplainProgramGoodput: the line says why PG is what it is, from the
// step-time model's figures, and says so when the measured PG is below
// what the model gives (the emulator, not the device, was slow).
func TestExplainProgramGoodput(t *testing.T) {
	for _, c := range []struct {
		pg, tc, sc, dev float64
		want            string
	}{
		{0.046, 2.83, 57, 59.8, "PG 0.046 = 2.83 ns ideal (the model FLOPs at TensorCore peak) / 59.8 ns device time per step: " +
			"the SparseCore's embedding lookups take 57 ns of it, which the compute roofline (MPG paper §4) does not count as ideal, " +
			"so this lookup-bound model's PG is low by design"},
		{0.9, 90, 10, 100, "PG 0.900 = 90 ns ideal (the model FLOPs at TensorCore peak) / 100 ns device time per step"},
		{0.02, 2.83, 57, 59.8, "PG 0.020 is below the 0.047 the step-time model gives (2.83 ns ideal / 59.8 ns device time per step): " +
			"steps took longer than their modelled device time, so the emulator's CPU set the pace (raise the time scale)"},
		{0, 0, 0, 0, ""},
	} {
		if got := ExplainProgramGoodput(c.pg, c.tc, c.sc, c.dev); got != c.want {
			t.Errorf("ExplainProgramGoodput(%v, %v, %v, %v):\n got %q\nwant %q", c.pg, c.tc, c.sc, c.dev, got, c.want)
		}
	}
	// Tables on parameter servers: the wait on them is what the roofline
	// does not count.
	s := MeanStep{TensorCore: 2.95, Servers: 1805, Device: 1808}
	want := "PG 0.002 = 2.95 ns ideal (the model FLOPs at TensorCore peak) / 1.81e+03 ns device time per step: " +
		"waiting on the parameter servers that hold the embedding tables (the rows and gradients over the host's network) takes 1.8e+03 ns of it, " +
		"which the compute roofline (MPG paper §4) does not count as ideal, so this lookup-bound model's PG is low by design"
	if got := s.Explain(0.0016); got != want {
		t.Errorf("on parameter servers:\n got %q\nwant %q", got, want)
	}
}
