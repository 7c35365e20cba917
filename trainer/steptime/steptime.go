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
	// LookupOverheadNS is fixed SparseCore time per looked-up row slice
	// (one unique row of one shard), and ShardOverheadNS fixed SparseCore
	// time per shard it holds, per step, beyond moving bytes: the same
	// quantities, with the same meaning, as trainer/embedding/partition's
	// Topology.LookupOverheadNS and ShardOverheadNS, so that the partition
	// cost model and the step-time model price a plan alike. Zero (the
	// default) leaves them out: the trainer's tiny emulated model would
	// otherwise be all overhead.
	LookupOverheadNS, ShardOverheadNS float64
}

// Network is the link between the slice's TPU host and the CPU parameter
// servers that hold the embedding tables in caught-up training (Ads paper
// III.B, V.B): a step whose tables are there waits for their rows before
// the device runs and for the servers to apply its gradients after, and
// the slice is held while it waits. Zero fields take the defaults.
type Network struct {
	// Bandwidth is the bytes per second the host exchanges with the
	// servers; every byte of a step's Lookups and Applies crosses it. A
	// caught-up slice has 1-4 chips (paper III.B), one TPU v4 machine (4
	// chips, VII.A), so one host's network carries the step. Default
	// DefaultNetworkBandwidth.
	Bandwidth float64
	// RoundTripNS is fixed time per round of RPCs (a step has two: its
	// Lookups to every server, then its Applies), beyond moving bytes.
	// Zero (the default) leaves it out, as Chip's overheads: the trainer's
	// tiny emulated model would otherwise be all round trips.
	RoundTripNS float64
}

// Defaults of Chip, Network and Model.
const (
	// DefaultNetworkBandwidth is 100 Gbit/s, a guess: a datacenter host's
	// network; the paper gives no figure. It decides the PG of a job whose
	// tables are on parameter servers (bench/placement.sh sweeps it).
	DefaultNetworkBandwidth = 12.5e9
	// DefaultContention is an assumption, not a measurement: the paper
	// reports the slowdown but no figure. A tenth of the overlapped time
	// is lost.
	DefaultContention         = 0.1
	DefaultPeakFLOPS          = 275e12
	DefaultHBMBandwidth       = 1.2e12
	DefaultSparseCoresPerChip = 4
	DefaultAccessGranularity  = 64
)

// EnsureDefaults fills zero fields.
func (n *Network) EnsureDefaults() {
	if n.Bandwidth <= 0 {
		n.Bandwidth = DefaultNetworkBandwidth
	}
}

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
	// Network prices the wait on parameter servers of a step whose tables
	// are on them (Work.ServerBytes).
	Network Network
	Chips   int
	Mode    Mode
	// Contention is the fraction κ of the shorter of the TensorCore and
	// SparseCore times that pipelined execution loses to contention for
	// HBM and ICI bandwidth (paper V.C, VII.D: both "become slower due to
	// contention"). Pipelined device time is max(TC, SC) + κ·min(TC, SC):
	// while both engines run, each goes 1/(1+κ) as fast, so the shorter
	// one takes (1+κ)·min and the longer one finishes its remaining work
	// alone. κ = 0 is perfect overlap, κ = 1 no gain over serialized
	// execution. Default DefaultContention; negative means none.
	// Serialized execution has no overlap and ignores it.
	Contention float64
	// TimeScale multiplies modelled time into emulated wall time (see the
	// package doc). Default 1.
	TimeScale float64
}

// EnsureDefaults fills zero fields.
func (m *Model) EnsureDefaults() {
	m.Chip.EnsureDefaults()
	m.Network.EnsureDefaults()
	if m.Chips <= 0 {
		m.Chips = 1
	}
	if m.TimeScale <= 0 {
		m.TimeScale = 1
	}
	if m.Contention == 0 {
		m.Contention = DefaultContention
	}
}

// SparseCores is the number of SparseCores of the slice.
func (m Model) SparseCores() int { return m.Chips * m.SparseCoresPerChip }

// RowAccessBytes is what one unique row slice of width elements of
// elemBytes each costs a SparseCore per step: a forward read, and a
// backward read and write, each rounded up to the access granularity.
// (SGD keeps no optimizer state; other optimizers would add their slots.)
func (m Model) RowAccessBytes(width, elemBytes int) float64 {
	m.EnsureDefaults()
	g := m.AccessGranularity
	b := width * elemBytes
	rounded := (b + g - 1) / g * g
	return 3 * float64(rounded)
}

// ServerRowBytes is what one unique row of width elements of elemBytes
// each costs the host's network per step when the tables are on parameter
// servers: its 8-byte id and its values in the Lookup, its id and its
// gradient in the Apply (proto/ps/v1's packets, without framing).
func (m Model) ServerRowBytes(width, elemBytes int) float64 {
	return 2*8 + 2*float64(width*elemBytes)
}

// Work is what one step does, measured while it executes.
type Work struct {
	// FLOPs are the model FLOPs of the step: dense forward and backward plus
	// embedding pooling.
	FLOPs float64
	// SparseCoreBytes[i] is the HBM traffic of SparseCore i.
	SparseCoreBytes []float64
	// SparseCoreLookups[i] is the number of row slices SparseCore i
	// looked up (unique rows × its shards holding them) and
	// SparseCoreShards[i] the number of shards it holds; they are priced
	// by LookupOverheadNS and ShardOverheadNS. Either may be nil.
	SparseCoreLookups []float64
	SparseCoreShards  []int
	// ServerBytes is what the step exchanged with the parameter servers
	// holding its tables (Σ ServerRowBytes over its unique rows), in
	// ServerRounds rounds of RPCs (2: the Lookups, then the Applies); both
	// zero while the tables are on the slice.
	ServerBytes  float64
	ServerRounds int
}

// SparseCoreNS returns the modelled time of every SparseCore in
// nanoseconds: bytes over its share of the chip's HBM bandwidth plus the
// lookup and shard overheads.
func (m Model) SparseCoreNS(w Work) []float64 {
	m.EnsureDefaults()
	perSC := m.HBMBandwidth / float64(m.SparseCoresPerChip) / 1e9 // bytes per ns
	n := max(len(w.SparseCoreBytes), len(w.SparseCoreLookups), len(w.SparseCoreShards))
	out := make([]float64, n)
	for i := range out {
		if i < len(w.SparseCoreBytes) {
			out[i] += w.SparseCoreBytes[i] / perSC
		}
		if i < len(w.SparseCoreLookups) {
			out[i] += w.SparseCoreLookups[i] * m.LookupOverheadNS
		}
		if i < len(w.SparseCoreShards) {
			out[i] += float64(w.SparseCoreShards[i]) * m.ShardOverheadNS
		}
	}
	return out
}

// Time is a step's modelled time, unscaled.
type Time struct {
	TensorCore time.Duration
	SparseCore time.Duration
	// Servers is the time the slice waits on the parameter servers that
	// hold its tables: Work.ServerBytes over Network.Bandwidth plus a
	// round trip per round. Zero while the tables are on the slice.
	Servers time.Duration
	// Device is the time the step holds the slice: the TensorCore and
	// SparseCore time under the Mode, plus Servers. The wait is not
	// overlapped in either mode (the servers apply a step's gradients
	// before the next step looks its rows up; trainer/model), and the
	// slice is held and idle while it waits, so it is in the denominator
	// of Program Goodput as the SparseCore's lookups are: MPG paper §4,
	// ideal time over the time the program held its accelerators.
	Device time.Duration
	// Ideal is the model FLOPs at peak (MPG paper §4, PG numerator); never
	// more than Device. Where the tables are does not change it: the
	// FLOPs are the same program's.
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
	var maxNS float64
	for _, ns := range m.SparseCoreNS(w) {
		maxNS = math.Max(maxNS, ns)
	}
	t.SparseCore = seconds(maxNS / 1e9)
	if m.Mode == Pipelined {
		hi, lo := max(t.TensorCore, t.SparseCore), min(t.TensorCore, t.SparseCore)
		kappa := max(m.Contention, 0) // negative: none
		t.Device = hi + time.Duration(math.Ceil(kappa*float64(lo)))
	} else {
		t.Device = t.TensorCore + t.SparseCore
	}
	if w.ServerBytes > 0 || w.ServerRounds > 0 {
		t.Servers = seconds((w.ServerBytes/m.Network.Bandwidth*1e9 + float64(w.ServerRounds)*m.Network.RoundTripNS) / 1e9)
		t.Device += t.Servers
	}
	t.Ideal = min(t.TensorCore, t.Device)
	return t
}

// Scale converts a modelled duration into emulated wall time.
func (m Model) Scale(d time.Duration) time.Duration {
	m.EnsureDefaults()
	v := float64(d) * m.TimeScale
	if v >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(v)
}
