package model

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/sigdata/sig/trainer/steptime"
)

// Result is what one step did.
type Result struct {
	// Loss is the mean binary cross-entropy over the batch (before the
	// update).
	Loss float64
	// Examples in the global batch.
	Examples int
	// Values is the number of feature values looked up (before
	// deduplication) and Unique the number of distinct (table, row) pairs
	// gathered after it (paper V.A, V.C).
	Values, Unique int
	// Work is the step's model FLOPs and per-SparseCore HBM bytes, row
	// slices looked up and shards held, for the step-time model.
	Work steptime.Work
	// PoolingFLOPs is the part of Work.FLOPs spent pooling embedding rows
	// (segment sums forward and backward), the rest being the dense layers.
	PoolingFLOPs float64
}

// tableBatch is one table's deduplicated view of a batch.
type tableBatch struct {
	rows   []int64   // unique rows, in first-occurrence order
	vecs   []float32 // gathered unique rows, len(rows) × Dim
	grads  []float64 // accumulated gradients, len(rows) × Dim
	ref    []int32   // per feature value: index into rows
	pooled []float32 // per example × Dim
}

// tableUpdate is one table's embedding update of a step: the gradient of
// each unique row it touched.
type tableUpdate struct {
	rows  []int64
	grads []float64 // len(rows) × Dim
}

// ErrRemote wraps an error of a Remote: the step did not happen (its
// embedding update may have reached some parameter servers), so the caller
// restores the last checkpoint and retrains; it is not the model's fault.
var ErrRemote = errors.New("model: parameter servers")

// Remote holds the embedding tables outside the slice: the CPU parameter
// servers of caught-up training (paper III.B; trainer/embedding/ps, which
// package trainer adapts to this). A step looks up every unique row of the
// batch once and sends one gradient per unique row.
type Remote interface {
	// Lookup fetches rows[t], the unique rows of sparse input t in
	// first-occurrence order, and returns their values: value(t, k) is row
	// rows[t][k] (its table's Dim floats).
	Lookup(ctx context.Context, rows [][]int64) (value func(t, k int) []float32, err error)
	// Apply sends the step's gradients, aligned with the last Lookup's
	// rows: grads[t][k·Dim:(k+1)·Dim] is the summed gradient of rows[t][k].
	// It returns once the servers have applied them (SGD, w -= float32(lr·g)
	// in float32, as apply does on the slice).
	Apply(ctx context.Context, grads [][]float32) error
}

// forward computes the loss of b and, when train, updates the parameters.
func (m *Model) forward(b *Examples, train bool) (Result, error) {
	return m.forwardOn(context.Background(), b, train, nil)
}

// forwardOn is forward with the tables on the slice (remote nil) or on
// parameter servers.
func (m *Model) forwardOn(ctx context.Context, b *Examples, train bool, remote Remote) (Result, error) {
	f := m.cfg.Features
	if err := b.Check(f); err != nil {
		return Result{}, err
	}
	n := b.Len()
	res := Result{Examples: n}
	if n == 0 {
		return res, nil
	}
	H := m.cfg.Hidden
	res.Work.SparseCoreBytes = make([]float64, m.plan.SparseCores)
	res.Work.SparseCoreLookups = make([]float64, m.plan.SparseCores)
	res.Work.SparseCoreShards = append([]int(nil), m.onSC...)

	// Embedding lookups, deduplicated per table over the whole batch.
	tbs := make([]tableBatch, len(f.Sparse))
	for t := range tbs {
		D, V := m.shapes[t].Dim, m.shapes[t].Vocab
		col := &b.Sparse[t]
		tb := &tbs[t]
		index := make(map[int64]int32, len(col.IDs))
		tb.ref = make([]int32, len(col.IDs))
		for v, id := range col.IDs {
			row := int64(id % uint64(V))
			k, ok := index[row]
			if !ok {
				k = int32(len(tb.rows))
				index[row] = k
				tb.rows = append(tb.rows, row)
			}
			tb.ref[v] = k
		}
		res.Values += len(col.IDs)
		res.Unique += len(tb.rows)
		res.PoolingFLOPs += 2 * float64(D) * float64(len(col.IDs))
		tb.vecs = make([]float32, len(tb.rows)*D)
		if remote != nil {
			continue // gathered from the servers below, for every table at once
		}
		for k, row := range tb.rows {
			for _, p := range m.gather(t, row, tb.vecs[k*D:(k+1)*D]) {
				res.Work.SparseCoreBytes[p.SparseCore] += m.cfg.Cost.RowAccessBytes(p.ColTo-p.ColFrom, 4)
				res.Work.SparseCoreLookups[p.SparseCore]++
			}
		}
	}
	if remote != nil {
		// One coalesced lookup for the whole step; no SparseCore touches a
		// row, so the step-time model prices none. It prices instead what
		// crosses the host's network: every unique row's id and values
		// here, its id and gradient in the Apply, in two rounds of RPCs
		// (steptime.Time.Servers).
		rows := make([][]int64, len(tbs))
		for t := range tbs {
			rows[t] = tbs[t].rows
			res.Work.ServerBytes += float64(len(tbs[t].rows)) * m.cfg.Cost.ServerRowBytes(m.shapes[t].Dim, 4)
		}
		res.Work.ServerRounds = 2
		value, err := remote.Lookup(ctx, rows)
		if err != nil {
			return res, fmt.Errorf("%w: lookup: %w", ErrRemote, err)
		}
		for t := range tbs {
			D := m.shapes[t].Dim
			for k := range tbs[t].rows {
				copy(tbs[t].vecs[k*D:(k+1)*D], value(t, k))
			}
		}
	}
	for t := range tbs {
		D := m.shapes[t].Dim
		col := &b.Sparse[t]
		tb := &tbs[t]
		// Mean pooling (a segment mean over the unique rows).
		tb.pooled = make([]float32, n*D)
		for j := 0; j < n; j++ {
			lo, hi := col.Offsets[j], col.Offsets[j+1]
			if hi == lo {
				continue
			}
			dst := tb.pooled[j*D : (j+1)*D]
			for v := lo; v < hi; v++ {
				src := tb.vecs[int(tb.ref[v])*D : int(tb.ref[v]+1)*D]
				for c := range dst {
					dst[c] += src[c]
				}
			}
			inv := 1 / float32(hi-lo)
			for c := range dst {
				dst[c] *= inv
			}
		}
	}

	// Dense layers, one example at a time (deterministic order).
	x := make([]float64, m.in)
	h := make([]float64, H)
	gw1 := make([]float64, len(m.w1))
	gb1 := make([]float64, H)
	gw2 := make([]float64, H)
	var gb2, loss float64
	dh := make([]float64, H)
	dx := make([]float64, m.in)
	dense := m.in - len(f.Dense) // offset of the dense features
	for j := 0; j < n; j++ {
		for t := range tbs {
			D, off := m.shapes[t].Dim, m.xoff[t]
			for c := 0; c < D; c++ {
				x[off+c] = float64(tbs[t].pooled[j*D+c])
			}
		}
		for k := range f.Dense {
			x[dense+k] = float64(b.Dense[k][j])
		}
		z := m.b2
		for u := 0; u < H; u++ {
			a := m.b1[u]
			row := m.w1[u*m.in : (u+1)*m.in]
			for i, xi := range x {
				a += row[i] * xi
			}
			if a < 0 {
				a = 0
			}
			h[u] = a
			z += m.w2[u] * a
		}
		y := float64(b.Labels[j])
		// Stable logistic loss: max(z,0) - z·y + log(1+exp(-|z|)).
		loss += math.Max(z, 0) - z*y + math.Log1p(math.Exp(-math.Abs(z)))
		if !train {
			continue
		}
		dz := (sigmoid(z) - y) / float64(n)
		gb2 += dz
		for u := 0; u < H; u++ {
			gw2[u] += dz * h[u]
			if h[u] > 0 {
				dh[u] = dz * m.w2[u]
			} else {
				dh[u] = 0
			}
		}
		for i := range dx {
			dx[i] = 0
		}
		for u := 0; u < H; u++ {
			if dh[u] == 0 {
				continue
			}
			gb1[u] += dh[u]
			row := m.w1[u*m.in : (u+1)*m.in]
			grow := gw1[u*m.in : (u+1)*m.in]
			for i, xi := range x {
				grow[i] += dh[u] * xi
				dx[i] += dh[u] * row[i]
			}
		}
		// Pooled-embedding gradients flow back to each occurrence's row.
		for t := range tbs {
			tb := &tbs[t]
			D, off := m.shapes[t].Dim, m.xoff[t]
			if tb.grads == nil {
				tb.grads = make([]float64, len(tb.rows)*D)
			}
			col := &b.Sparse[t]
			lo, hi := col.Offsets[j], col.Offsets[j+1]
			if hi == lo {
				continue
			}
			inv := 1 / float64(hi-lo)
			for v := lo; v < hi; v++ {
				g := tb.grads[int(tb.ref[v])*D : int(tb.ref[v]+1)*D]
				for c := range g {
					g[c] += dx[off+c] * inv
				}
			}
		}
	}
	res.Loss = loss / float64(n)
	// FLOPs: dense forward is 2·(in·H + H) per example, backward twice
	// that; pooling adds D per value forward and D per value backward.
	res.Work.FLOPs = 6*float64(n)*float64(m.in*H+H) + res.PoolingFLOPs
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return res, fmt.Errorf("%w: loss %v at step %d", ErrNonFinite, res.Loss, m.steps+1)
	}
	if !train {
		return res, nil
	}
	if remote != nil {
		// The servers apply the embedding update before the dense one
		// lands: a failed Apply leaves the dense layers as they were (the
		// attempt is retrained from a checkpoint either way). The update
		// is not one step stale: Apply returns once it is applied.
		grads := make([][]float32, len(tbs))
		for t := range tbs {
			grads[t] = make([]float32, len(tbs[t].grads))
			for i, g := range tbs[t].grads {
				grads[t][i] = float32(g)
			}
		}
		if err := remote.Apply(ctx, grads); err != nil {
			return res, fmt.Errorf("%w: apply: %w", ErrRemote, err)
		}
	}
	lr := m.cfg.LearningRate
	for i := range m.w1 {
		m.w1[i] -= lr * gw1[i]
	}
	for u := 0; u < H; u++ {
		m.b1[u] -= lr * gb1[u]
		m.w2[u] -= lr * gw2[u]
	}
	m.b2 -= lr * gb2
	update := make([]tableUpdate, len(tbs))
	for t := range tbs {
		update[t] = tableUpdate{rows: tbs[t].rows, grads: tbs[t].grads}
	}
	if remote != nil {
		// Applied by the servers above.
	} else if m.cfg.StaleEmbeddingGradients {
		// Pipelined (paper V.C): this step's rows were gathered before the
		// previous step's update; that update lands now, this one next step.
		m.Flush()
		m.pending = update
	} else {
		m.apply(update)
	}
	m.steps++
	return res, nil
}

// apply subtracts the embedding learning rate times each gradient from its
// row.
func (m *Model) apply(update []tableUpdate) {
	elr := m.cfg.EmbeddingLearningRate
	for t, u := range update {
		if u.grads == nil {
			continue
		}
		D := m.shapes[t].Dim
		for k, row := range u.rows {
			m.scatterSGD(t, row, u.grads[k*D:(k+1)*D], elr)
		}
	}
}

// Flush applies the pending (one step stale) embedding update, if any: the
// pipeline drains (StaleEmbeddingGradients). A no-op otherwise.
func (m *Model) Flush() {
	if m.pending != nil {
		m.apply(m.pending)
		m.pending = nil
	}
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// Step trains on one global batch: the loss is computed before the update.
// A non-finite loss returns ErrNonFinite and changes nothing.
func (m *Model) Step(b *Examples) (Result, error) { return m.forward(b, true) }

// StepRemote trains on one global batch with the embedding tables on
// parameter servers (remote): the unique rows are looked up there, not in
// the model's own tables, and the embedding update is sent there; the dense
// layers train here as in Step. Errors of the servers wrap ErrRemote and
// change no dense parameter. A pending stale update (pipelined mode) must
// have been flushed before the tables moved (TableValues flushes).
func (m *Model) StepRemote(ctx context.Context, b *Examples, remote Remote) (Result, error) {
	return m.forwardOn(ctx, b, true, remote)
}

// Evaluate returns the loss of b without training (with a pending stale
// update not applied).
func (m *Model) Evaluate(b *Examples) (Result, error) { return m.forward(b, false) }
