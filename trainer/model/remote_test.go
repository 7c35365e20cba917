package model

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// tableRemote is a parameter server written plainly: every table a dense
// float32 matrix, SGD as trainer/embedding/ps applies it (w -= float32(lr·g),
// the gradient summed from zero). The real servers over gRPC are tested
// against the slice in package trainer.
type tableRemote struct {
	vals   [][]float32
	dims   []int
	lr     float32
	rows   [][]int64
	fail   bool
	lookup int
}

func (r *tableRemote) Lookup(_ context.Context, rows [][]int64) (func(t, k int) []float32, error) {
	if r.fail {
		return nil, errors.New("connection refused")
	}
	r.rows, r.lookup = rows, r.lookup+1
	return func(t, k int) []float32 {
		d := int64(r.dims[t])
		return r.vals[t][rows[t][k]*d : (rows[t][k]+1)*d]
	}, nil
}

func (r *tableRemote) Apply(_ context.Context, grads [][]float32) error {
	for t, rows := range r.rows {
		d := int64(r.dims[t])
		for k, row := range rows {
			w := r.vals[t][row*d : (row+1)*d]
			for e := range w {
				g := float32(0) + grads[t][int64(k)*d+int64(e)]
				w[e] -= float32(r.lr * g)
			}
		}
	}
	return nil
}

// TestRemoteTablesAreBitIdentical trains the same batches with the tables
// in the model and with them on a parameter server (StepRemote): losses and
// every parameter — the tables read back from the server — are the same
// bits, because the slice's SGD is the servers' float32 arithmetic. A
// server that fails makes the step fail with ErrRemote and changes no
// dense parameter.
func TestRemoteTablesAreBitIdentical(t *testing.T) {
	f, ex := adsExamples(t, "ctr_small", 3, 4000)
	cfg := Config{Features: f, Vocab: 1 << 10, Seed: 5}
	slice, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	onPS, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Train a little on the slice first: the tables move with their state.
	const batch = 200
	for i := 0; i+batch <= 1000; i += batch {
		if _, err := slice.Step(ex.Slice(i, i+batch)); err != nil {
			t.Fatal(err)
		}
		if _, err := onPS.Step(ex.Slice(i, i+batch)); err != nil {
			t.Fatal(err)
		}
	}
	r := &tableRemote{vals: onPS.TableValues(), lr: float32(onPS.Config().EmbeddingLearningRate)}
	for k := range f.Sparse {
		r.dims = append(r.dims, onPS.Config().Shape(k).Dim)
	}
	for i := 1000; i+batch <= ex.Len(); i += batch {
		a, err := slice.Step(ex.Slice(i, i+batch))
		if err != nil {
			t.Fatal(err)
		}
		b, err := onPS.StepRemote(context.Background(), ex.Slice(i, i+batch), r)
		if err != nil {
			t.Fatal(err)
		}
		if a.Loss != b.Loss || a.Unique != b.Unique {
			t.Fatalf("batch at %d: loss %v on the slice, %v on the server", i, a.Loss, b.Loss)
		}
		if b.Work.SparseCoreBytes[0] != 0 {
			t.Fatalf("a step on the servers priced %v SparseCore bytes", b.Work.SparseCoreBytes)
		}
		// What the step sent and received instead: each unique row's id
		// and values, its id and gradient, in two rounds of RPCs; the same
		// FLOPs as on the slice.
		var want float64
		for t, rows := range r.rows {
			want += float64(len(rows)) * (2*8 + 2*4*float64(r.dims[t]))
		}
		if b.Work.ServerBytes != want || b.Work.ServerRounds != 2 || b.Work.FLOPs != a.Work.FLOPs || a.Work.ServerBytes != 0 {
			t.Fatalf("batch at %d: %v bytes in %d rounds to the servers (want %v in 2), FLOPs %v (the slice's %v)",
				i, b.Work.ServerBytes, b.Work.ServerRounds, want, b.Work.FLOPs, a.Work.FLOPs)
		}
	}
	if r.lookup != (ex.Len()-1000)/batch {
		t.Fatalf("%d lookups for %d steps: not one per step", r.lookup, (ex.Len()-1000)/batch)
	}
	if err := onPS.SetTableValues(r.vals); err != nil {
		t.Fatal(err)
	}
	want, _ := slice.MarshalBinary()
	got, _ := onPS.MarshalBinary()
	if !bytes.Equal(got, want) {
		t.Fatal("parameters trained on the server differ from those trained on the slice")
	}
	r.fail = true
	if _, err := onPS.StepRemote(context.Background(), ex.Slice(0, batch), r); !errors.Is(err, ErrRemote) {
		t.Fatalf("a failing server: %v, want ErrRemote", err)
	}
	if after, _ := onPS.MarshalBinary(); !bytes.Equal(after, got) {
		t.Fatal("a failed step changed the model")
	}
}
