package steptime

import (
	"fmt"
	"math"
	"time"
)

// Mode is how TensorCore and SparseCore work of consecutive steps overlap
// (Ads paper V.C, Figure 5).
type Mode int

const (
	// Serialized: the SparseCore's lookups, then the TensorCore, then the
	// SparseCore's updates; device time is the sum.
	Serialized Mode = iota
	// Pipelined: the SparseCore starts step N+1 while the TensorCore runs
	// step N; device time is the larger of the two.
	Pipelined
)

func (m Mode) String() string {
	if m == Pipelined {
		return "pipelined"
	}
	return "serialized"
}

// ParseMode reads "serialized" or "pipelined".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "serialized", "":
		return Serialized, nil
	case "pipelined":
		return Pipelined, nil
	}
	return 0, fmt.Errorf("steptime: unknown mode %q (want serialized or pipelined)", s)
}

// Chip is one emulated TPU chip. Zero fields take the TPU v4 defaults.
type Chip struct {
	// PeakFLOPS is the TensorCore's peak in FLOP/s. Default 275e12 (TPU v4,
	// bf16).
	PeakFLOPS float64
	// HBMBandwidth is the chip's HBM bandwidth in bytes/s, shared evenly by
	// its SparseCores. Default 1.2e12.
	HBMBandwidth float64
	// SparseCoresPerChip. Default 4.
	SparseCoresPerChip int
	// AccessGranularity is the smallest HBM access in bytes. Default 64.
	AccessGranularity int
}

// Defaults of Chip.
const (
	DefaultPeakFLOPS          = 275e12
	DefaultHBMBandwidth       = 1.2e12
	DefaultSparseCoresPerChip = 4
	DefaultAccessGranularity  = 64
)

// EnsureDefaults fills zero fields.
func (c *Chip) EnsureDefaults() {
	if c.PeakFLOPS <= 0 {
		c.PeakFLOPS = DefaultPeakFLOPS
	}
	if c.HBMBandwidth <= 0 {
		c.HBMBandwidth = DefaultHBMBandwidth
	}
	if c.SparseCoresPerChip <= 0 {
		c.SparseCoresPerChip = DefaultSparseCoresPerChip
	}
	if c.AccessGranularity <= 0 {
		c.AccessGranularity = DefaultAccessGranularity
	}
}

// Model is a slice of Chips identical chips executing in Mode, with modelled
// time stretched by TimeScale.
type Model struct {
	Chip
	Chips int
	Mode  Mode
	// TimeScale multiplies modelled time into emulated wall time (see the
	// package doc). Default 1.
	TimeScale float64
}

// EnsureDefaults fills zero fields.
func (m *Model) EnsureDefaults() {
	m.Chip.EnsureDefaults()
	if m.Chips <= 0 {
		m.Chips = 1
	}
	if m.TimeScale <= 0 {
		m.TimeScale = 1
	}
}

// SparseCores is the number of SparseCores of the slice.
func (m Model) SparseCores() int { return m.Chips * m.SparseCoresPerChip }

// RowAccessBytes is what one unique row slice of width elements of
// elemBytes each costs a SparseCore per step: a forward read, and a
// backward read and write, each rounded up to the access granularity.
// (SGD keeps no optimizer state; other optimizers would add their slots.)
func (m Model) RowAccessBytes(width, elemBytes int) float64 {
	g := m.AccessGranularity
	if g <= 0 {
		g = DefaultAccessGranularity
	}
	b := width * elemBytes
	rounded := (b + g - 1) / g * g
	return 3 * float64(rounded)
}

// Work is what one step does, measured while it executes.
type Work struct {
	// FLOPs are the model FLOPs of the step: dense forward and backward plus
	// embedding pooling.
	FLOPs float64
	// SparseCoreBytes[i] is the HBM traffic of SparseCore i.
	SparseCoreBytes []float64
}

// Time is a step's modelled time, unscaled.
type Time struct {
	TensorCore time.Duration
	SparseCore time.Duration
	// Device is the step's device time under the Mode.
	Device time.Duration
	// Ideal is the model FLOPs at peak (MPG paper §4, PG numerator); never
	// more than Device.
	Ideal time.Duration
}

func seconds(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s > float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(s * 1e9))
}

// Step returns the modelled time of a step doing w.
func (m Model) Step(w Work) Time {
	m.EnsureDefaults()
	var t Time
	t.TensorCore = seconds(w.FLOPs / (float64(m.Chips) * m.PeakFLOPS))
	perSC := m.HBMBandwidth / float64(m.SparseCoresPerChip)
	var maxB float64
	for _, b := range w.SparseCoreBytes {
		maxB = math.Max(maxB, b)
	}
	t.SparseCore = seconds(maxB / perSC)
	if m.Mode == Pipelined {
		t.Device = max(t.TensorCore, t.SparseCore)
	} else {
		t.Device = t.TensorCore + t.SparseCore
	}
	t.Ideal = min(t.TensorCore, t.Device)
	return t
}

// Scale converts a modelled duration into emulated wall time.
func (m Model) Scale(d time.Duration) time.Duration {
	s := m.TimeScale
	if s <= 0 {
		s = 1
	}
	v := float64(d) * s
	if v >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(v)
}
