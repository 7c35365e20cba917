package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sigdata/sig/trainer/embedding/partition"
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
	// Shapes, when set, gives the table of each sparse input (in
	// Features.Sparse order) its own vocabulary and width; zero fields take
	// Vocab and Dim. The synthetic models of the embeddings report
	// (trainer/embedding/embreport: vocabularies from 64 rows, widths 1 to 380) use
	// it; the controller's models leave it empty.
	Shapes []Shape
	// StaleEmbeddingGradients applies every step's embedding gradients one
	// step late, as pipelined execution does (paper V.C, Figure 5b: the
	// SparseCore looks up step N+1's rows before step N's updates land):
	// step N+1 gathers rows without step N's update, then applies step N's
	// update and keeps its own for the next step. Dense parameters are
	// updated at once. Flush (and MarshalBinary, which flushes) applies the
	// pending update: the pipeline drains before a checkpoint. Arithmetic
	// and order are fixed, so the result is still deterministic and
	// independent of the plan.
	StaleEmbeddingGradients bool
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

// Shape is the size of one embedding table.
type Shape struct {
	Vocab int64 // rows
	Dim   int   // columns
}

// Shape returns the table shape of sparse input k (Features.Sparse[k]).
func (c Config) Shape(k int) Shape {
	sh := Shape{Vocab: c.Vocab, Dim: c.Dim}
	if k < len(c.Shapes) {
		if c.Shapes[k].Vocab > 0 {
			sh.Vocab = c.Shapes[k].Vocab
		}
		if c.Shapes[k].Dim > 0 {
			sh.Dim = c.Shapes[k].Dim
		}
	}
	return sh
}

// MaxParameters bounds the embedding elements of a model (1 GiB of
// float32): the emulator keeps every table in memory.
const MaxParameters = 1 << 28

// Tables returns the partitioner's description of the model's embedding
// tables: SGD, and valency mean 1 with uniform access — the compile-time
// assumption, since valency "is data dependent and not known at compile
// time" (paper VII.D); measured statistics (trainer/embedding/fdp) replace it.
func (c Config) Tables() []partition.Table {
	c.EnsureDefaults()
	var out []partition.Table
	sgd, _ := partition.OptimizerByName("sgd")
	for k, i := range c.Features.Sparse {
		sh := c.Shape(k)
		out = append(out, partition.Table{Name: c.Features.Inputs[i].Name, Vocab: sh.Vocab, Dim: sh.Dim,
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
	shapes []Shape     // per sparse input
	xoff   []int       // per sparse input: its pooled embedding's offset in the dense input
	shards [][]float32 // per plan shard: Rows × width, row-major
	widths []int       // per plan shard
	onSC   []int       // shards per SparseCore
	// pending is the embedding update of the last step, not yet applied
	// (StaleEmbeddingGradients); nil when there is none.
	pending []tableUpdate

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
	if cfg.Hidden > 4096 {
		return nil, fmt.Errorf("%w: hidden %d out of range", ErrInvalidConfig, cfg.Hidden)
	}
	if len(cfg.Shapes) > len(cfg.Features.Sparse) {
		return nil, fmt.Errorf("%w: %d table shapes for %d sparse inputs", ErrInvalidConfig, len(cfg.Shapes), len(cfg.Features.Sparse))
	}
	m := &Model{cfg: cfg}
	var elems int64
	for k := range cfg.Features.Sparse {
		sh := cfg.Shape(k)
		if sh.Vocab > 1<<26 || sh.Dim > 1024 {
			return nil, fmt.Errorf("%w: table %d: vocab %d, dim %d out of range", ErrInvalidConfig, k, sh.Vocab, sh.Dim)
		}
		elems += sh.Vocab * int64(sh.Dim)
		m.shapes = append(m.shapes, sh)
		m.xoff = append(m.xoff, m.in)
		m.in += sh.Dim
	}
	if elems > MaxParameters {
		return nil, fmt.Errorf("%w: %d embedding parameters, more than the emulator's %d", ErrInvalidConfig, elems, MaxParameters)
	}
	m.in += len(cfg.Features.Dense)
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
	// Every shard's elements from (table, global row, column), so the
	// initial tables do not depend on the plan.
	for t, ti := range m.tables {
		vocab := m.shapes[t].Vocab
		for _, si := range m.plan.Layouts[ti].Shards {
			s := &m.plan.Shards[si]
			w := m.widths[si]
			data := m.shards[si]
			for local := int64(0); local*int64(w) < int64(len(data)); local++ {
				row := s.TableRow(vocab, local)
				for c := 0; c < w; c++ {
					data[local*int64(w)+int64(c)] = initElem(cfg.Seed, t, row, s.ColFrom+c)
				}
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
	m.tables = nil
	for _, tb := range tables {
		ti, ok := plan.TableIndex(tb.Name)
		if !ok {
			return fmt.Errorf("%w: plan has no table %q", ErrInvalidConfig, tb.Name)
		}
		m.tables = append(m.tables, ti)
	}
	m.shards = make([][]float32, len(plan.Shards))
	m.widths = make([]int, len(plan.Shards))
	m.onSC = make([]int, plan.SparseCores)
	for i, s := range plan.Shards {
		ti, _ := plan.TableIndex(s.Table)
		rows := s.RowCount(plan.Layouts[ti].Vocab)
		m.widths[i] = s.ColTo - s.ColFrom
		m.shards[i] = make([]float32, rows*int64(m.widths[i]))
		m.onSC[s.SparseCore]++
	}
	return nil
}

// Plan is the placement in use.
func (m *Model) Plan() *partition.Plan { return m.plan }

// Config returns the model's configuration with defaults filled in.
func (m *Model) Config() Config { return m.cfg }

// Steps is the number of steps applied since New or the last restore.
func (m *Model) Steps() uint64 { return m.steps }

// setRow writes row of sparse input t from src (len of its Dim).
func (m *Model) setRow(t int, row int64, src []float32) {
	m.places, _ = m.plan.LocateAppend(m.places[:0], m.tables[t], row)
	for _, p := range m.places {
		w := p.ColTo - p.ColFrom
		copy(m.shards[p.Shard][p.LocalRow*int64(w):p.LocalRow*int64(w)+int64(w)], src[p.ColFrom:p.ColTo])
	}
}

// gather copies row of sparse input t into dst (len of its Dim) and returns the
// placements (one per column range) it used.
func (m *Model) gather(t int, row int64, dst []float32) []partition.Placement {
	m.places, _ = m.plan.LocateAppend(m.places[:0], m.tables[t], row)
	for _, p := range m.places {
		w := p.ColTo - p.ColFrom
		copy(dst[p.ColFrom:p.ColTo], m.shards[p.Shard][p.LocalRow*int64(w):p.LocalRow*int64(w)+int64(w)])
	}
	return m.places
}

// scatterSGD subtracts lr × grad from row of sparse input t, in float32:
// the gradient (summed in float64 over the batch) and the learning rate are
// rounded to float32 and their product rounded before the subtraction —
// exactly what a parameter server's SGD does (trainer/embedding/ps), so a
// table trains to the same bits on the slice and on the servers.
func (m *Model) scatterSGD(t int, row int64, grad []float64, lr float64) {
	lr32 := float32(lr)
	m.places, _ = m.plan.LocateAppend(m.places[:0], m.tables[t], row)
	for _, p := range m.places {
		w := p.ColTo - p.ColFrom
		dst := m.shards[p.Shard][p.LocalRow*int64(w) : p.LocalRow*int64(w)+int64(w)]
		for c := range dst {
			dst[c] -= float32(lr32 * float32(grad[p.ColFrom+c]))
		}
	}
}

// TableValues returns every table, per sparse input, row-major (Vocab ×
// Dim floats): what moves onto parameter servers. A pending stale update is
// applied first.
func (m *Model) TableValues() [][]float32 {
	m.Flush()
	out := make([][]float32, len(m.tables))
	for t, sh := range m.shapes {
		out[t] = make([]float32, sh.Vocab*int64(sh.Dim))
		for r := int64(0); r < sh.Vocab; r++ {
			m.gather(t, r, out[t][r*int64(sh.Dim):(r+1)*int64(sh.Dim)])
		}
	}
	return out
}

// SetTableValues overwrites every table (the layout TableValues returns):
// the tables come back from parameter servers before a checkpoint.
func (m *Model) SetTableValues(vals [][]float32) error {
	if len(vals) != len(m.tables) {
		return fmt.Errorf("%w: values of %d tables, the model has %d", ErrIncompatible, len(vals), len(m.tables))
	}
	for t, sh := range m.shapes {
		if int64(len(vals[t])) != sh.Vocab*int64(sh.Dim) {
			return fmt.Errorf("%w: table %d: %d floats, want %d", ErrIncompatible, t, len(vals[t]), sh.Vocab*int64(sh.Dim))
		}
	}
	m.pending = nil
	for t, sh := range m.shapes {
		for r := int64(0); r < sh.Vocab; r++ {
			m.setRow(t, r, vals[t][r*int64(sh.Dim):(r+1)*int64(sh.Dim)])
		}
	}
	return nil
}

// Row returns a copy of row of the table of sparse input t (tests and
// checkpoints).
func (m *Model) Row(t int, row int64) []float32 {
	out := make([]float32, m.shapes[t].Dim)
	m.gather(t, row, out)
	return out
}

// Poison sets the output bias to NaN, so the next step's loss is NaN. It is
// the fault-injection hook behind the NaN training-hold test (paper VI.A):
// the NaN then flows through the real forward pass.
func (m *Model) Poison() { m.b2 = math.NaN() }
