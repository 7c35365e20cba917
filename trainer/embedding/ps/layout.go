package ps

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	psv1 "github.com/sigdata/sig/proto/ps/v1"
)

// ErrInvalid marks a malformed configuration or packet.
var ErrInvalid = errors.New("ps: invalid")

// Optimizer is how a server applies a row's summed gradient.
type Optimizer int

// The optimizers. Both are element-wise and deterministic in float32.
const (
	// SGD: w -= lr·g.
	SGD Optimizer = Optimizer(psv1.Optimizer_OPTIMIZER_SGD)
	// Adagrad: a += g²; w -= lr·g/√a, with a starting at InitialAccumulator.
	Adagrad Optimizer = Optimizer(psv1.Optimizer_OPTIMIZER_ADAGRAD)
)

func (o Optimizer) String() string {
	switch o {
	case SGD:
		return "sgd"
	case Adagrad:
		return "adagrad"
	}
	return fmt.Sprintf("optimizer(%d)", int(o))
}

// Table is one embedding table held by the parameter servers.
type Table struct {
	Name         string
	Vocab        int64
	Dim          int
	Optimizer    Optimizer
	LearningRate float32
	// InitialAccumulator is Adagrad's starting accumulator (> 0).
	InitialAccumulator float32
	// Rows start uniform in [-InitScale, InitScale], drawn from a hash of
	// (InitSeed, Name, row, column), so a row's initial value does not
	// depend on the sharding or on stacking.
	InitScale float32
	InitSeed  uint64
}

// Variable is what a server stores: one table, or with table stacking every
// table of one width and one set of optimizer settings (paper V.B: "tables
// with the same width and optimization parameters are stacked to form a
// single variable"). Table k of the variable holds rows [Offsets[k],
// Offsets[k]+vocab).
type Variable struct {
	Dim     int
	Rows    int64
	Tables  []int // indices into Layout.Tables
	Offsets []int64

	opt         Optimizer
	lr, initAcc float32
	tableScale  []float32
	tableSeed   []uint64 // per table of the variable: hash of (seed, name)
}

// Layout maps tables to variables and variable rows to servers: row g of a
// variable lives on server g mod Shards at local index g / Shards (cyclic
// distribution, paper V.B: "with table stacking, we require the use of
// cyclic distribution to ensure that each table is spread across all
// parameter servers").
type Layout struct {
	Tables    []Table
	Stacking  bool
	Shards    int
	Variables []Variable

	tableVar []int   // per table: its variable
	tableOff []int64 // per table: its first row in the variable
}

const (
	maxTables = 1 << 16
	maxDim    = 1 << 14
	maxVocab  = 1 << 40
	maxShards = 1 << 12
)

// NewLayout checks the tables and builds the layout.
func NewLayout(tables []Table, stacking bool, shards int) (*Layout, error) {
	if shards < 1 || shards > maxShards {
		return nil, fmt.Errorf("%w: shards must be in [1, %d], got %d", ErrInvalid, maxShards, shards)
	}
	if len(tables) == 0 || len(tables) > maxTables {
		return nil, fmt.Errorf("%w: need 1 to %d tables, got %d", ErrInvalid, maxTables, len(tables))
	}
	l := &Layout{Tables: slices.Clone(tables), Stacking: stacking, Shards: shards,
		tableVar: make([]int, len(tables)), tableOff: make([]int64, len(tables))}
	seen := map[string]bool{}
	type stackKey struct {
		dim         int
		opt         Optimizer
		lr, initAcc uint32
	}
	stacks := map[stackKey]int{}
	for i, t := range tables {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("%w: table %d has no name", ErrInvalid, i)
		case seen[t.Name]:
			return nil, fmt.Errorf("%w: duplicate table %q", ErrInvalid, t.Name)
		case t.Vocab < 1 || t.Vocab > maxVocab:
			return nil, fmt.Errorf("%w: table %q: vocab must be in [1, 2^40], got %d", ErrInvalid, t.Name, t.Vocab)
		case t.Dim < 1 || t.Dim > maxDim:
			return nil, fmt.Errorf("%w: table %q: dim must be in [1, %d], got %d", ErrInvalid, t.Name, maxDim, t.Dim)
		case t.Optimizer != SGD && t.Optimizer != Adagrad:
			return nil, fmt.Errorf("%w: table %q: unknown optimizer %v", ErrInvalid, t.Name, t.Optimizer)
		case !(t.LearningRate > 0) || math.IsInf(float64(t.LearningRate), 0):
			return nil, fmt.Errorf("%w: table %q: learning rate must be > 0, got %v", ErrInvalid, t.Name, t.LearningRate)
		case t.Optimizer == Adagrad && !(t.InitialAccumulator > 0):
			return nil, fmt.Errorf("%w: table %q: Adagrad needs initial_accumulator > 0", ErrInvalid, t.Name)
		case !(t.InitScale >= 0) || math.IsInf(float64(t.InitScale), 0):
			return nil, fmt.Errorf("%w: table %q: init scale must be >= 0", ErrInvalid, t.Name)
		}
		seen[t.Name] = true
		v := -1
		k := stackKey{t.Dim, t.Optimizer, math.Float32bits(t.LearningRate), math.Float32bits(t.InitialAccumulator)}
		if stacking {
			if j, ok := stacks[k]; ok {
				v = j
			}
		}
		if v < 0 {
			v = len(l.Variables)
			l.Variables = append(l.Variables, Variable{Dim: t.Dim, opt: t.Optimizer, lr: t.LearningRate, initAcc: t.InitialAccumulator})
			stacks[k] = v
		}
		vr := &l.Variables[v]
		l.tableVar[i], l.tableOff[i] = v, vr.Rows
		vr.Tables = append(vr.Tables, i)
		vr.Offsets = append(vr.Offsets, vr.Rows)
		vr.tableScale = append(vr.tableScale, t.InitScale)
		vr.tableSeed = append(vr.tableSeed, tableSeed(t))
		vr.Rows += t.Vocab
		if vr.Rows > maxVocab {
			return nil, fmt.Errorf("%w: stacked variable of width %d exceeds 2^40 rows", ErrInvalid, t.Dim)
		}
	}
	return l, nil
}

// Locate returns the variable holding row of table t, and the row's index
// in the variable.
func (l *Layout) Locate(t int, row int64) (v int, g int64) {
	return l.tableVar[t], l.tableOff[t] + row
}

// Server is the server holding variable row g.
func (l *Layout) Server(g int64) int { return int(g % int64(l.Shards)) }

// localRows is how many rows of a variable of n rows server shard holds.
func localRows(n int64, shard, shards int) int64 {
	if n <= int64(shard) {
		return 0
	}
	return (n - int64(shard) + int64(shards) - 1) / int64(shards)
}

func tableSeed(t Table) uint64 {
	h := fnv.New64a()
	h.Write([]byte(t.Name))
	return mix(t.InitSeed ^ h.Sum64())
}

// mix is SplitMix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// initRow fills dst (one row of width len(dst)) with table row r's initial
// value.
func initRow(dst []float32, seed uint64, scale float32, r int64) {
	base := mix(seed ^ uint64(r)*0x9e3779b97f4a7c15)
	for c := range dst {
		u := float32(mix(base+uint64(c))>>40) / (1 << 24) // [0, 1)
		dst[c] = (2*u - 1) * scale
	}
}

// InitialRow returns row r of table t as it is before any update: what a
// reference model starts from.
func (l *Layout) InitialRow(t int, r int64) []float32 {
	tb := l.Tables[t]
	dst := make([]float32, tb.Dim)
	initRow(dst, tableSeed(tb), tb.InitScale, r)
	return dst
}

func tablesToProto(ts []Table) []*psv1.Table {
	out := make([]*psv1.Table, len(ts))
	for i, t := range ts {
		out[i] = &psv1.Table{Name: t.Name, Vocab: t.Vocab, Dim: int32(t.Dim), Optimizer: psv1.Optimizer(t.Optimizer),
			LearningRate: t.LearningRate, InitialAccumulator: t.InitialAccumulator, InitScale: t.InitScale, InitSeed: t.InitSeed}
	}
	return out
}

func tablesFromProto(ps []*psv1.Table) []Table {
	out := make([]Table, len(ps))
	for i, t := range ps {
		out[i] = Table{Name: t.GetName(), Vocab: t.GetVocab(), Dim: int(t.GetDim()), Optimizer: Optimizer(t.GetOptimizer()),
			LearningRate: t.GetLearningRate(), InitialAccumulator: t.GetInitialAccumulator(), InitScale: t.GetInitScale(), InitSeed: t.GetInitSeed()}
	}
	return out
}

func (l *Layout) variablesProto() []*psv1.Variable {
	out := make([]*psv1.Variable, len(l.Variables))
	for i, v := range l.Variables {
		pv := &psv1.Variable{Dim: int32(v.Dim), Rows: v.Rows, Offsets: slices.Clone(v.Offsets)}
		for _, t := range v.Tables {
			pv.Tables = append(pv.Tables, l.Tables[t].Name)
		}
		out[i] = pv
	}
	return out
}

// sameConfig reports whether two layouts hold the same tables the same way.
func sameConfig(a, b *Layout) bool {
	return a.Stacking == b.Stacking && a.Shards == b.Shards && slices.Equal(a.Tables, b.Tables)
}
