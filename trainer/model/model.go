package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sigdata/sig/trainer/partition"
	"github.com/sigdata/sig/trainer/steptime"
)

// ErrNonFinite reports a step whose loss is NaN or infinite. No parameter
// was changed. It is permanent: the controller places a training hold (paper
// VI.A).
var ErrNonFinite = errors.New("model: loss is not finite")

// Config is the model's architecture and optimizer. Zero fields take
// defaults (EnsureDefaults).
type Config struct {
	Features Features
	// Vocab is the rows of every embedding table. Default 1<<15.
	Vocab int64
	// Dim is the embedding width. Default 8.
	Dim int
	// Hidden is the width of the hidden layer. Default 32.
	Hidden int
	// LearningRate of the dense layers and EmbeddingLearningRate of the
	// tables (plain SGD). Defaults 0.05 and 0.5: mean pooling divides an
	// embedding row's gradient by the valency, so the tables get a larger
	// step.
	LearningRate, EmbeddingLearningRate float64
	// Seed of the initial parameters.
	Seed uint64
	// Plan places the tables; nil places each table whole on SparseCore 0
	// of a one-SparseCore slice. Tables are named after the sparse inputs.
	Plan *partition.Plan
	// Cost prices a unique row slice for the SparseCore byte counts (its
	// access granularity); the zero value takes the steptime defaults.
	Cost steptime.Model
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Vocab <= 0 {
		c.Vocab = 1 << 15
	}
	if c.Dim <= 0 {
		c.Dim = 8
	}
	if c.Hidden <= 0 {
		c.Hidden = 32
	}
	if c.LearningRate <= 0 {
		c.LearningRate = 0.05
	}
	if c.EmbeddingLearningRate <= 0 {
		c.EmbeddingLearningRate = 0.5
	}
	c.Cost.EnsureDefaults()
}

// Tables returns the partitioner's description of the model's embedding
// tables (SGD, valency mean 1 as a placeholder: RowSharding ignores it).
func (c Config) Tables() []partition.Table {
	c.EnsureDefaults()
	var out []partition.Table
	sgd, _ := partition.OptimizerByName("sgd")
	for _, i := range c.Features.Sparse {
		out = append(out, partition.Table{Name: c.Features.Inputs[i].Name, Vocab: c.Vocab, Dim: c.Dim,
			Optimizer: sgd, Valency: partition.Valency{Mean: 1}})
	}
	return out
}

// Model is the emulated slice's parameters and step. Not safe for
// concurrent use.
type Model struct {
	cfg    Config
	plan   *partition.Plan
	tables []int       // plan table index per sparse input
	shards [][]float32 // per plan shard: Rows × width, row-major
	widths []int       // per plan shard

	in     int // dense input width: sparse × Dim + dense
	w1     []float64
	b1     []float64
	w2     []float64
	b2     float64
	steps  uint64
	places []partition.Placement
}

// New builds a model with initial parameters.
func New(cfg Config) (*Model, error) {
	cfg.EnsureDefaults()
	if len(cfg.Features.Inputs) == 0 {
		return nil, fmt.Errorf("%w: no model inputs", ErrInvalidConfig)
	}
	if cfg.Vocab > 1<<26 || cfg.Dim > 1024 || cfg.Hidden > 4096 {
		return nil, fmt.Errorf("%w: vocab %d, dim %d, hidden %d out of range", ErrInvalidConfig, cfg.Vocab, cfg.Dim, cfg.Hidden)
	}
	m := &Model{cfg: cfg}
	m.in = len(cfg.Features.Sparse)*cfg.Dim + len(cfg.Features.Dense)
	h := cfg.Hidden
	m.w1 = make([]float64, h*m.in)
	m.b1 = make([]float64, h)
	m.w2 = make([]float64, h)
	r := rand.New(rand.NewPCG(cfg.Seed, 0x6d6f64656c))
	lim1 := math.Sqrt(6 / float64(m.in+h))
	for i := range m.w1 {
		m.w1[i] = (2*r.Float64() - 1) * lim1
	}
	lim2 := math.Sqrt(6 / float64(h+1))
	for i := range m.w2 {
		m.w2[i] = (2*r.Float64() - 1) * lim2
	}
	if err := m.place(cfg.Plan); err != nil {
		return nil, err
	}
	for t := range m.tables {
		for row := int64(0); row < cfg.Vocab; row++ {
			for c := 0; c < cfg.Dim; c++ {
				m.setElem(t, row, c, initElem(cfg.Seed, t, row, c))
			}
		}
	}
	return m, nil
}

// initElem is a deterministic function of (seed, table, row, column), so
// the initial tables do not depend on the plan.
func initElem(seed uint64, t int, row int64, c int) float32 {
	x := seed ^ uint64(t)*0x9e3779b97f4a7c15 ^ uint64(row)*0xbf58476d1ce4e5b9 ^ uint64(c)*0x94d049bb133111eb
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	u := float64(x>>11) / (1 << 53)
	return float32((u - 0.5) * 0.1)
}

// place allocates the shards of plan (nil: one shard per table).
func (m *Model) place(plan *partition.Plan) error {
	tables := m.cfg.Tables()
	if plan == nil {
		p, err := partition.RowSharding(tables, partition.Topology{Chips: 1, SparseCoresPerChip: 1, HBMBytesPerChip: 1 << 50})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		plan = p
	} else {
		cp := *plan
		cp.Shards = append([]partition.Shard(nil), plan.Shards...)
		if err := cp.Validate(tables); err != nil {
			return fmt.Errorf("%w: plan: %v", ErrInvalidConfig, err)
		}
		plan = &cp
	}
	m.plan = plan
	m.tables = m.tables[:0]
	for _, tb := range tables {
		ti, ok := plan.TableIndex(tb.Name)
		if !ok {
			return fmt.Errorf("%w: plan has no table %q", ErrInvalidConfig, tb.Name)
		}
		m.tables = append(m.tables, ti)
	}
	m.shards = make([][]float32, len(plan.Shards))
	m.widths = make([]int, len(plan.Shards))
	for i, s := range plan.Shards {
		rows := shardRows(m.cfg.Vocab, s)
		m.widths[i] = s.ColTo - s.ColFrom
		m.shards[i] = make([]float32, rows*int64(m.widths[i]))
	}
	return nil
}

func shardRows(vocab int64, s partition.Shard) int64 {
	switch s.RowDist {
	case partition.RowsCyclic:
		K, k := int64(s.RowParts), int64(s.RowPart)
		if k >= vocab {
			return 0
		}
		return (vocab-1-k)/K + 1
	case partition.RowsBlock:
		K, k := int64(s.RowParts), int64(s.RowPart)
		return (k+1)*vocab/K - k*vocab/K
	}
	return vocab
}

// Plan is the placement in use.
func (m *Model) Plan() *partition.Plan { return m.plan }

// Config returns the model's configuration with defaults filled in.
func (m *Model) Config() Config { return m.cfg }

// Steps is the number of steps applied since New or the last restore.
func (m *Model) Steps() uint64 { return m.steps }

func (m *Model) setElem(t int, row int64, c int, v float32) {
	m.places, _ = m.plan.LocateAppend(m.places[:0], m.tables[t], row)
	for _, p := range m.places {
		if c >= p.ColFrom && c < p.ColTo {
			w := p.ColTo - p.ColFrom
			m.shards[p.Shard][p.LocalRow*int64(w)+int64(c-p.ColFrom)] = v
			return
		}
	}
}

// gather copies row of sparse input t into dst (len Dim) and returns the
// placements (one per column range) it used.
func (m *Model) gather(t int, row int64, dst []float32) []partition.Placement {
	m.places, _ = m.plan.LocateAppend(m.places[:0], m.tables[t], row)
	for _, p := range m.places {
		w := p.ColTo - p.ColFrom
		copy(dst[p.ColFrom:p.ColTo], m.shards[p.Shard][p.LocalRow*int64(w):p.LocalRow*int64(w)+int64(w)])
	}
	return m.places
}

// scatterSGD subtracts lr × grad from row of sparse input t.
func (m *Model) scatterSGD(t int, row int64, grad []float64, lr float64) {
	m.places, _ = m.plan.LocateAppend(m.places[:0], m.tables[t], row)
	for _, p := range m.places {
		w := p.ColTo - p.ColFrom
		dst := m.shards[p.Shard][p.LocalRow*int64(w) : p.LocalRow*int64(w)+int64(w)]
		for c := range dst {
			dst[c] = float32(float64(dst[c]) - lr*grad[p.ColFrom+c])
		}
	}
}

// Row returns a copy of row of the table of sparse input t (tests and
// checkpoints).
func (m *Model) Row(t int, row int64) []float32 {
	out := make([]float32, m.cfg.Dim)
	m.gather(t, row, out)
	return out
}

// Poison sets the output bias to NaN, so the next step's loss is NaN. It is
// the fault-injection hook behind the NaN training-hold test (paper VI.A):
// the NaN then flows through the real forward pass.
func (m *Model) Poison() { m.b2 = math.NaN() }
