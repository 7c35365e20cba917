package partition

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/sigdata/sig/internal/units"
)

// ErrOutOfMemory reports that no plan fits the embedding tables into the
// per-chip HBM. It is a permanent error: the trainer turns it into a training
// hold that waits for a person (paper VI.A, "out-of-memory errors").
var ErrOutOfMemory = errors.New("partition: out of memory")

// ErrInvalidProblem reports a problem (or configuration) that is malformed:
// a zero or negative size, an unknown optimizer, an unknown field. Like
// ErrOutOfMemory it is permanent (paper VI.A, "invalid model configurations").
var ErrInvalidProblem = errors.New("partition: invalid problem")

// Problem is everything the partitioner needs: the embedding tables, the
// hardware they are placed on, and the batch size that sets how many feature
// values one step looks up (and deduplicates).
type Problem struct {
	Tables   []Table
	Topology Topology
	// BatchSize is the number of examples whose lookups are deduplicated
	// together in one step: the global batch, since the input batch is
	// deduplicated before the all-to-all exchange (paper V.A).
	BatchSize int
}

// Table is one embedding table.
type Table struct {
	Name  string
	Vocab int64 // rows
	Dim   int   // columns: the embedding width
	// BytesPerElement is the size of one embedding element (4 for float32).
	// Zero means DefaultBytesPerElement.
	BytesPerElement int
	Optimizer       Optimizer
	Valency         Valency
	Access          Access
	// Measured, when non-nil, carries statistics profiled from real batches;
	// present fields override the assumptions above (paper V.C,
	// feedback-directed partitioning).
	Measured *Measured
}

// Valency is the number of feature values one example carries for a table.
// It is data dependent and unknown at compile time (paper V.A), so the
// partitioner works from statistics.
type Valency struct {
	// Mean feature values per example. Required unless Dist is given.
	Mean float64
	// Dist, when non-empty, is the distribution of feature values per
	// example. It refines the dedup model: with a distribution, the expected
	// number of unique rows uses the distribution's generating function
	// instead of Mean draws per example (see profile.go).
	Dist []ValencyWeight
}

// ValencyWeight is one point of a valency distribution: Weight is the
// relative frequency of examples carrying exactly Valency feature values.
type ValencyWeight struct {
	Valency int
	Weight  float64
}

// Access is the access-frequency profile over a table's rows: the
// probability that one feature value looks up row r. At most one of ZipfS and
// RowFreq is set; neither means uniform access.
type Access struct {
	// ZipfS > 0 draws row r (0-based) with probability proportional to
	// (r+1)^-ZipfS, so row 0 is the hottest: the vocabulary is sorted by
	// access frequency, which is when cyclic beats block distribution
	// (paper V.A).
	ZipfS float64
	// RowFreq gives the relative frequency of every row, in row order
	// (len(RowFreq) == Vocab). Not necessarily sorted.
	RowFreq []float64
}

// Measured holds statistics profiled from sampled training batches (paper
// V.C: counts of feature values per example and unique feature values per
// batch, kept in a database shared across models). Zero fields are absent.
type Measured struct {
	// MeanValency replaces Valency (and drops its distribution).
	MeanValency float64
	// ValencyDist, when non-empty, is the measured distribution of feature
	// values per example (the profiler's valency histogram); it replaces
	// Valency and takes precedence over MeanValency in the dedup model.
	ValencyDist []ValencyWeight
	// UniquePerBatch is the measured number of unique rows looked up per
	// batch. The model keeps the row profile's shape and solves for the
	// number of draws per batch that yields exactly this many unique rows.
	UniquePerBatch float64
	// RowFreq replaces Access with a measured per-row frequency profile
	// (len == Vocab).
	RowFreq []float64
	// HotRows replace Access with a sparse measured profile, for
	// vocabularies too large for RowFreq: the measured fraction of lookups
	// of each of the hottest rows; the remaining mass is spread over the
	// other rows uniformly (hashed feature ids), or, when TailZipfS > 0,
	// with weight (r+1)^-TailZipfS by row position (a frequency-sorted
	// vocabulary). Ignored when RowFreq is given.
	HotRows   []RowFraction
	TailZipfS float64
	// RowLookups is the measured mean number of deduplicated lookups of each
	// row per batch (len == Vocab), the quantity the paper's worked example
	// gives directly (VII.D). When present it overrides everything else in
	// the dedup model: it already is its output.
	RowLookups []float64
}

// RowFraction is one measured hot row: the fraction of a table's feature
// values that look it up.
type RowFraction struct {
	Row      int64   `json:"row"`
	Fraction float64 `json:"fraction"`
}

// Optimizer describes how the training optimizer updates an embedding row.
// The partitioner needs to know whether it is element-wise, because only
// element-wise optimizers allow column partitioning (paper V.A: LAMB and SM3
// operate on an entire row), and how much state it keeps, because that state
// lives in HBM next to the row and is read and written on every update.
type Optimizer struct {
	Name        string
	ElementWise bool
	// SlotsPerElement is optimizer state per embedding element, stored with
	// the element type (Adagrad: 1 accumulator, Adam: 2 moments).
	SlotsPerElement int
	// SlotsPerRow is float32 optimizer state per row (row-wise Adagrad's one
	// accumulator, SM3's row cover).
	SlotsPerRow int
}

// The optimizers the configuration may name. Adding one here is all it
// takes; the rest of the model reads the fields.
var optimizers = map[string]Optimizer{
	"sgd":             {Name: "sgd", ElementWise: true},
	"adagrad":         {Name: "adagrad", ElementWise: true, SlotsPerElement: 1},
	"adam":            {Name: "adam", ElementWise: true, SlotsPerElement: 2},
	"ftrl":            {Name: "ftrl", ElementWise: true, SlotsPerElement: 2},
	"rowwise_adagrad": {Name: "rowwise_adagrad", ElementWise: false, SlotsPerRow: 1},
	"lamb":            {Name: "lamb", ElementWise: false, SlotsPerElement: 2},
	"sm3":             {Name: "sm3", ElementWise: false, SlotsPerRow: 1},
}

// OptimizerByName returns the named optimizer.
func OptimizerByName(name string) (Optimizer, bool) {
	o, ok := optimizers[name]
	return o, ok
}

// OptimizerNames lists the known optimizers, sorted.
func OptimizerNames() []string {
	names := make([]string, 0, len(optimizers))
	for n := range optimizers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Topology is the hardware the tables are partitioned over. The nodes of the
// partitioning problem are the SparseCores (paper V.A); memory is a per-chip
// resource shared by the chip's SparseCores.
type Topology struct {
	Chips              int
	SparseCoresPerChip int
	// HBMBytesPerChip is the HBM available for embedding tables and their
	// optimizer state on one chip.
	HBMBytesPerChip int64
	// HBMBandwidth is one chip's HBM bandwidth in bytes per second, shared
	// evenly by its SparseCores. Zero means DefaultHBMBandwidth.
	HBMBandwidth float64
	// AccessGranularity is the smallest HBM access in bytes: a row slice
	// narrower than this still costs this much (paper VII.D: column
	// partitioning lowers the access granularity and so the bandwidth
	// utilization). Zero means DefaultAccessGranularity.
	AccessGranularity int
	// LookupOverheadNS is the fixed SparseCore time per looked-up row per
	// shard, beyond moving its bytes (paper V.A: "each feature value indexes
	// multiple shards"). Used as given; the config parser fills in
	// DefaultLookupOverheadNS when the field is absent.
	LookupOverheadNS float64
	// ShardOverheadNS is the fixed SparseCore time per shard per step
	// (setting up one table shard's gather and update). It is what makes
	// table partitioning attractive for small tables. Used as given; the
	// config parser fills in DefaultShardOverheadNS when absent.
	ShardOverheadNS float64
}

// Defaults for optional fields. The bandwidth is a TPU v4 chip's
// (cloud.google.com/tpu/docs/v4). The access granularity and the overheads
// are guesses — orders of magnitude; no public source measures a
// SparseCore's fixed cost per row slice or per shard, and this emulator
// cannot — so every report that uses them labels what they decide as
// modelled and sweeps them (trainer/embedding/embreport).
const (
	DefaultBytesPerElement   = 4
	DefaultHBMBandwidth      = 1.2e12 // bytes/s per chip
	DefaultAccessGranularity = 64     // bytes
	DefaultLookupOverheadNS  = 0.1
	DefaultShardOverheadNS   = 1000
)

// SparseCores is the number of nodes of the partitioning problem.
func (t Topology) SparseCores() int { return t.Chips * t.SparseCoresPerChip }

// withDefaults returns t with zero optional fields set.
func (t Topology) withDefaults() Topology {
	if t.HBMBandwidth == 0 {
		t.HBMBandwidth = DefaultHBMBandwidth
	}
	if t.AccessGranularity == 0 {
		t.AccessGranularity = DefaultAccessGranularity
	}
	return t
}

func (tb Table) bytesPerElement() int {
	if tb.BytesPerElement == 0 {
		return DefaultBytesPerElement
	}
	return tb.BytesPerElement
}

// rowStateBytes is the HBM one row of width w occupies with its optimizer
// state.
func (tb Table) rowStateBytes(w int) int64 {
	e := int64(tb.bytesPerElement())
	return int64(w)*e*int64(1+tb.Optimizer.SlotsPerElement) + 4*int64(tb.Optimizer.SlotsPerRow)
}

// HBMBytes is the memory the whole table takes with its optimizer state.
func (tb Table) HBMBytes() int64 { return tb.Vocab * tb.rowStateBytes(tb.Dim) }

// Limits that keep arithmetic in range; they are far above any real model.
const (
	maxVocab     = 1 << 40
	maxDim       = 1 << 20
	maxValency   = 1 << 20
	maxBatch     = 1 << 30
	maxNodes     = 1 << 16
	maxTables    = 1 << 16
	maxRowBytes  = 1 << 10 // bytes per element
	maxRowFreqLn = 1 << 24 // explicit per-row profiles
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidProblem, fmt.Sprintf(format, args...))
}

// Validate checks the problem and reports the first thing wrong, naming the
// table and field. A table whose unsplit size exceeds the HBM of all chips
// together is reported as ErrOutOfMemory (no partitioning can fit it).
func (p *Problem) Validate() error {
	if len(p.Tables) == 0 {
		return invalid("tables: at least one table is required")
	}
	if len(p.Tables) > maxTables {
		return invalid("tables: %d tables, at most %d", len(p.Tables), maxTables)
	}
	if err := p.Topology.validate(); err != nil {
		return err
	}
	if p.BatchSize <= 0 || p.BatchSize > maxBatch {
		return invalid("batch_size must be in [1, %d], got %d", maxBatch, p.BatchSize)
	}
	seen := make(map[string]int, len(p.Tables))
	for i := range p.Tables {
		tb := &p.Tables[i]
		if tb.Name == "" {
			return invalid("tables[%d]: name is required", i)
		}
		if j, dup := seen[tb.Name]; dup {
			return invalid("tables[%d]: duplicate table name %q (also tables[%d])", i, tb.Name, j)
		}
		seen[tb.Name] = i
		if err := tb.validate(); err != nil {
			return err
		}
	}
	total := float64(p.Topology.Chips) * float64(p.Topology.HBMBytesPerChip)
	for i := range p.Tables {
		tb := &p.Tables[i]
		if b := float64(tb.Vocab) * float64(tb.rowStateBytes(tb.Dim)); b > total {
			return fmt.Errorf("%w: table %q needs %s of HBM (with %s optimizer state), more than all %d chips hold (%s)",
				ErrOutOfMemory, tb.Name, floatBytes(b), tb.Optimizer.Name, p.Topology.Chips, floatBytes(total))
		}
	}
	return nil
}

func (t Topology) validate() error {
	switch {
	case t.Chips <= 0 || t.Chips > maxNodes:
		return invalid("topology: chips must be in [1, %d], got %d", maxNodes, t.Chips)
	case t.SparseCoresPerChip <= 0 || t.SparseCoresPerChip > maxNodes:
		return invalid("topology: sparsecores_per_chip must be in [1, %d], got %d", maxNodes, t.SparseCoresPerChip)
	case t.Chips*t.SparseCoresPerChip > maxNodes:
		return invalid("topology: %d SparseCores in all, at most %d", t.Chips*t.SparseCoresPerChip, maxNodes)
	case t.HBMBytesPerChip <= 0:
		return invalid("topology: hbm_bytes_per_chip must be > 0, got %d", t.HBMBytesPerChip)
	case !(t.HBMBandwidth >= 0) || math.IsInf(t.HBMBandwidth, 0):
		return invalid("topology: hbm_bytes_per_sec_per_chip must be > 0, got %v", t.HBMBandwidth)
	case t.AccessGranularity < 0 || t.AccessGranularity > 1<<20:
		return invalid("topology: access_granularity_bytes must be in [1, %d], got %d", 1<<20, t.AccessGranularity)
	case !(t.LookupOverheadNS >= 0) || math.IsInf(t.LookupOverheadNS, 0):
		return invalid("topology: lookup_overhead_ns must be >= 0, got %v", t.LookupOverheadNS)
	case !(t.ShardOverheadNS >= 0) || math.IsInf(t.ShardOverheadNS, 0):
		return invalid("topology: shard_overhead_ns must be >= 0, got %v", t.ShardOverheadNS)
	}
	return nil
}

func (tb *Table) validate() error {
	name := tb.Name
	switch {
	case tb.Vocab <= 0 || tb.Vocab > maxVocab:
		return invalid("table %q: vocab must be in [1, %d], got %d", name, int64(maxVocab), tb.Vocab)
	case tb.Dim <= 0 || tb.Dim > maxDim:
		return invalid("table %q: dim must be in [1, %d], got %d", name, maxDim, tb.Dim)
	case tb.BytesPerElement < 0 || tb.BytesPerElement > maxRowBytes:
		return invalid("table %q: bytes_per_element must be in [1, %d], got %d", name, maxRowBytes, tb.BytesPerElement)
	}
	if tb.Optimizer.Name == "" {
		return invalid("table %q: optimizer is required (one of %s)", name, strings.Join(OptimizerNames(), ", "))
	}
	if tb.Optimizer.SlotsPerElement < 0 || tb.Optimizer.SlotsPerRow < 0 || tb.Optimizer.SlotsPerElement > 64 || tb.Optimizer.SlotsPerRow > 64 {
		return invalid("table %q: optimizer %q has out-of-range state slots", name, tb.Optimizer.Name)
	}
	if err := tb.Valency.validate(name, ""); err != nil {
		return err
	}
	a := tb.Access
	switch {
	case !(a.ZipfS >= 0) || a.ZipfS > 100:
		return invalid("table %q: zipf_s must be in [0, 100], got %v", name, a.ZipfS)
	case a.ZipfS > 0 && a.RowFreq != nil:
		return invalid("table %q: give zipf_s or row_freq, not both", name)
	}
	if a.RowFreq != nil {
		if err := checkPerRow(name, "row_freq", a.RowFreq, tb.Vocab, true); err != nil {
			return err
		}
	}
	if m := tb.Measured; m != nil {
		switch {
		case !(m.MeanValency >= 0) || m.MeanValency > maxValency:
			return invalid("table %q: measured.mean_valency must be in [0, %d], got %v", name, maxValency, m.MeanValency)
		case !(m.UniquePerBatch >= 0) || m.UniquePerBatch > float64(tb.Vocab):
			return invalid("table %q: measured.unique_per_batch must be in [0, vocab=%d], got %v", name, tb.Vocab, m.UniquePerBatch)
		}
		if m.RowFreq != nil {
			if err := checkPerRow(name, "measured.row_freq", m.RowFreq, tb.Vocab, true); err != nil {
				return err
			}
		}
		if len(m.ValencyDist) > 0 {
			if err := (Valency{Dist: m.ValencyDist}).validate(name, "measured."); err != nil {
				return err
			}
		}
		if !(m.TailZipfS >= 0) || m.TailZipfS > 100 {
			return invalid("table %q: measured.tail_zipf_s must be in [0, 100], got %v", name, m.TailZipfS)
		}
		if len(m.HotRows) > maxRowFreqLn {
			return invalid("table %q: measured.hot_rows has %d entries, at most %d", name, len(m.HotRows), maxRowFreqLn)
		}
		var hot float64
		seenRow := make(map[int64]bool, len(m.HotRows))
		for i, h := range m.HotRows {
			switch {
			case h.Row < 0 || h.Row >= tb.Vocab:
				return invalid("table %q: measured.hot_rows[%d].row %d out of range [0, vocab=%d)", name, i, h.Row, tb.Vocab)
			case seenRow[h.Row]:
				return invalid("table %q: measured.hot_rows[%d]: row %d given twice", name, i, h.Row)
			case !(h.Fraction >= 0) || h.Fraction > 1:
				return invalid("table %q: measured.hot_rows[%d].fraction must be in [0, 1], got %v", name, i, h.Fraction)
			}
			seenRow[h.Row] = true
			hot += h.Fraction
		}
		if hot > 1+1e-9 {
			return invalid("table %q: measured.hot_rows fractions sum to %v, more than 1", name, hot)
		}
		if m.RowLookups != nil {
			if err := checkPerRow(name, "measured.row_lookups", m.RowLookups, tb.Vocab, false); err != nil {
				return err
			}
			for r, v := range m.RowLookups {
				if v > 1 {
					// A row is looked up at most once per batch after
					// deduplication.
					return invalid("table %q: measured.row_lookups[%d] = %v, but a deduplicated row is looked up at most once per batch", name, r, v)
				}
			}
		}
	}
	return nil
}

func (v Valency) validate(name, field string) error {
	if !(v.Mean >= 0) || v.Mean > maxValency {
		return invalid("table %q: %svalency must be in (0, %d], got %v", name, field, maxValency, v.Mean)
	}
	if len(v.Dist) == 0 {
		if v.Mean <= 0 {
			return invalid("table %q: %svalency must be > 0, got %v", name, field, v.Mean)
		}
		return nil
	}
	var sum, mean float64
	for i, w := range v.Dist {
		if w.Valency < 0 || w.Valency > maxValency {
			return invalid("table %q: %svalency_dist[%d].valency must be in [0, %d], got %d", name, field, i, maxValency, w.Valency)
		}
		if !(w.Weight >= 0) || math.IsInf(w.Weight, 0) {
			return invalid("table %q: %svalency_dist[%d].weight must be >= 0, got %v", name, field, i, w.Weight)
		}
		sum += w.Weight
		mean += w.Weight * float64(w.Valency)
	}
	if sum <= 0 {
		return invalid("table %q: %svalency_dist weights sum to zero", name, field)
	}
	mean /= sum
	if mean <= 0 {
		return invalid("table %q: %svalency_dist has mean 0: the table is never looked up", name, field)
	}
	if v.Mean > 0 && math.Abs(v.Mean-mean) > 0.01*mean {
		return invalid("table %q: %svalency %v disagrees with the mean %v of %svalency_dist", name, field, v.Mean, mean, field)
	}
	return nil
}

func checkPerRow(table, field string, xs []float64, vocab int64, needPositive bool) error {
	if int64(len(xs)) != vocab {
		return invalid("table %q: %s has %d entries, want one per row (vocab=%d)", table, field, len(xs), vocab)
	}
	if len(xs) > maxRowFreqLn {
		return invalid("table %q: %s has %d entries, at most %d", table, field, len(xs), maxRowFreqLn)
	}
	var sum float64
	for i, x := range xs {
		if !(x >= 0) || math.IsInf(x, 0) {
			return invalid("table %q: %s[%d] must be >= 0 and finite, got %v", table, field, i, x)
		}
		sum += x
	}
	if needPositive && sum <= 0 {
		return invalid("table %q: %s sums to zero", table, field)
	}
	return nil
}

// floatBytes is units.Bytes of a byte count computed in float64 (products of
// table sizes, which can exceed int64 for absurd inputs): those are shown as
// the int64 maximum rather than wrapping to a negative size.
func floatBytes(b float64) string {
	if b >= math.MaxInt64 {
		return units.Bytes(math.MaxInt64)
	}
	return units.Bytes(int64(b))
}
