package model

import (
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

// forward computes the loss of b and, when train, updates the parameters.
func (m *Model) forward(b *Examples, train bool) (Result, error) {
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
		for k, row := range tb.rows {
			for _, p := range m.gather(t, row, tb.vecs[k*D:(k+1)*D]) {
				res.Work.SparseCoreBytes[p.SparseCore] += m.cfg.Cost.RowAccessBytes(p.ColTo-p.ColFrom, 4)
				res.Work.SparseCoreLookups[p.SparseCore]++
			}
		}
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
	if m.cfg.StaleEmbeddingGradients {
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

// Evaluate returns the loss of b without training (with a pending stale
// update not applied).
func (m *Model) Evaluate(b *Examples) (Result, error) { return m.forward(b, false) }
