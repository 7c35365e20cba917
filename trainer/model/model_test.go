package model

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/sigdata/sig/trainer/embedding/partition"
)

// baseRateLoss is the cross-entropy of always predicting the mean label:
// what a model that learned nothing from the features achieves.
func baseRateLoss(e *Examples) float64 {
	var p float64
	for _, y := range e.Labels {
		p += float64(y)
	}
	p /= float64(len(e.Labels))
	return -(p*math.Log(p) + (1-p)*math.Log(1-p))
}

// TestLossFalls trains on generated Ads events with the ctr_small model's
// inputs and checks that the held-out loss falls below both its initial
// value and the base rate: the model learns from query-title overlap and
// category, not just the click rate.
func TestLossFalls(t *testing.T) {
	f, train := adsExamples(t, "ctr_small", 1, 60000)
	_, held := adsExamples(t, "ctr_small", 2, 8000)
	m, err := New(Config{Features: f, Vocab: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	before, err := m.Evaluate(held)
	if err != nil {
		t.Fatal(err)
	}
	const batch = 256
	for epoch := 0; epoch < 2; epoch++ {
		for i := 0; i+batch <= train.Len(); i += batch {
			if _, err := m.Step(train.Slice(i, i+batch)); err != nil {
				t.Fatal(err)
			}
		}
	}
	after, err := m.Evaluate(held)
	if err != nil {
		t.Fatal(err)
	}
	base := baseRateLoss(held)
	t.Logf("held-out loss: initial %.4f, trained %.4f, base rate %.4f", before.Loss, after.Loss, base)
	if !(after.Loss < before.Loss-0.1) {
		t.Errorf("loss did not fall: %.4f -> %.4f", before.Loss, after.Loss)
	}
	if !(after.Loss < base-0.005) {
		t.Errorf("trained loss %.4f does not beat the base rate %.4f: the features were not learned", after.Loss, base)
	}
}

// TestPlacementIsBitIdentical trains the same batches on one unpartitioned
// model and on models whose tables are row-sharded (cyclic), block-sharded
// and column-split across SparseCores: every parameter must be bit-identical.
func TestPlacementIsBitIdentical(t *testing.T) {
	f, ex := adsExamples(t, "ctr_wide", 3, 3000)
	base := Config{Features: f, Vocab: 1000, Dim: 8, Seed: 9}
	tables := base.Tables()
	topo := partition.Topology{Chips: 2, SparseCoresPerChip: 2, HBMBytesPerChip: 1 << 30}
	rows, err := partition.RowSharding(tables, topo)
	if err != nil {
		t.Fatal(err)
	}
	// A hand-made hybrid plan: table 0 block-partitioned in 3 parts, table 1
	// split into column ranges [0,3) and [3,8), the rest whole on SparseCore 3.
	hybrid := handMadePlan(tables, map[int][]partition.Shard{
		0: blockRows(tables[0], 3),
		1: columnSplit(tables[1], 0, 3, tables[1].Dim),
	})
	for name, plan := range map[string]*partition.Plan{"row-sharding": rows, "hybrid": hybrid} {
		checkPlanBitIdentical(t, name, base, plan, ex)
	}
}

func TestStateRoundTripAndReplan(t *testing.T) {
	f, ex := adsExamples(t, "cvr", 4, 2000)
	cfg := Config{Features: f, Vocab: 512, Seed: 1}
	a, _ := New(cfg)
	for i := 0; i+250 <= 1000; i += 250 {
		if _, err := a.Step(ex.Slice(i, i+250)); err != nil {
			t.Fatal(err)
		}
	}
	state, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := partition.RowSharding(cfg.Tables(), partition.Topology{Chips: 3, SparseCoresPerChip: 1, HBMBytesPerChip: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	cfg2 := cfg
	cfg2.Plan = plan
	b, _ := New(cfg2)
	if err := b.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	if b.Steps() != 4 {
		t.Fatalf("steps %d after restore", b.Steps())
	}
	if err := a.Replan(plan); err != nil {
		t.Fatal(err)
	}
	rest := ex.Slice(1000, 1250)
	ra, _ := a.Step(rest)
	rb, _ := b.Step(rest)
	if ra.Loss != rb.Loss {
		t.Fatalf("restored model diverges: %v vs %v", ra.Loss, rb.Loss)
	}
	// Corruption and other architectures are refused.
	state[len(state)/2] ^= 1
	if err := b.UnmarshalBinary(state); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("corrupt state: %v", err)
	}
	other, _ := New(Config{Features: f, Vocab: 256})
	good, _ := a.MarshalBinary()
	if err := other.UnmarshalBinary(good); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("other architecture: %v", err)
	}
}

func TestNonFiniteLossChangesNothing(t *testing.T) {
	f, ex := adsExamples(t, "ctr_small", 5, 500)
	m, _ := New(Config{Features: f, Vocab: 256})
	before, _ := m.MarshalBinary()
	b2 := m.b2
	m.Poison()
	_, err := m.Step(ex.Slice(0, 100))
	if !errors.Is(err, ErrNonFinite) {
		t.Fatalf("poisoned step: %v", err)
	}
	if m.Steps() != 0 || m.Finite() {
		t.Fatalf("steps %d finite %v", m.Steps(), m.Finite())
	}
	// Only the poisoned bias differs from before.
	m.b2 = b2
	if after, _ := m.MarshalBinary(); !bytes.Equal(after, before) {
		t.Fatal("the failed step changed parameters besides the poisoned bias")
	}
	m.Poison()
	if err := m.UnmarshalBinary(before); err != nil {
		t.Fatal(err)
	}
	if !m.Finite() {
		t.Fatal("restore did not clear the NaN")
	}
}

func TestFeaturesRejectUnknownTypes(t *testing.T) {
	if _, err := NewFeatures(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if _, err := NewFeatures([]Input{{Name: "a", Type: 0}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if _, err := NewFeatures([]Input{{Name: "a", Type: 2}, {Name: "a", Type: 2}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
}

func TestExamplesSliceAppendDrop(t *testing.T) {
	f, ex := adsExamples(t, "ctr_wide", 6, 300)
	a := ex.Slice(0, 100)
	b := ex.Slice(100, 300)
	j := NewExamples(f)
	j.Append(a)
	j.Append(b)
	if err := j.Check(f); err != nil {
		t.Fatal(err)
	}
	k := ex.Slice(0, 300)
	k.DropFront(100)
	for i := range k.EventIDs {
		if k.EventIDs[i] != b.EventIDs[i] {
			t.Fatal("DropFront")
		}
	}
	for s := range k.Sparse {
		if len(k.Sparse[s].IDs) != len(b.Sparse[s].IDs) || k.Sparse[s].Offsets[len(k.Sparse[s].Offsets)-1] != b.Sparse[s].Offsets[len(b.Sparse[s].Offsets)-1] {
			t.Fatal("DropFront sparse")
		}
	}
	if err := k.Check(f); err != nil {
		t.Fatal(err)
	}
}
