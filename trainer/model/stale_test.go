package model

import (
	"slices"
	"testing"
)

// TestStaleGradientsAreOneStepLate pins down the pipelined semantics (paper
// V.C, Figure 5b): after one stale step the tables are untouched while the
// dense layers moved; flushing then gives exactly the parameters of one
// ordinary step; and from the second step on the stale model differs from
// the ordinary one (its lookups miss the previous update).
func TestStaleGradientsAreOneStepLate(t *testing.T) {
	f, ex := adsExamples(t, "ctr_small", 7, 1200)
	cfg := Config{Features: f, Vocab: 512, Seed: 3}
	fresh, _ := New(cfg)
	cfg.StaleEmbeddingGradients = true
	stale, _ := New(cfg)
	initial := stale.Row(0, int64(ex.Sparse[0].IDs[0]%512))

	b1, b2, b3 := ex.Slice(0, 400), ex.Slice(400, 800), ex.Slice(800, 1200)
	if _, err := fresh.Step(b1); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Step(b1); err != nil {
		t.Fatal(err)
	}
	if got := stale.Row(0, int64(ex.Sparse[0].IDs[0]%512)); !slices.Equal(got, initial) {
		t.Fatal("a stale step changed an embedding row before the next step")
	}
	if stale.b2 != fresh.b2 {
		t.Fatal("a stale step did not update the dense layers at once")
	}
	if got := fresh.Row(0, int64(ex.Sparse[0].IDs[0]%512)); slices.Equal(got, initial) {
		t.Fatal("an ordinary step did not update the row")
	}
	// Flushing lands the update: one stale step + flush == one step.
	probe := mustMarshal(t, stale) // MarshalBinary flushes
	if string(probe) != string(mustMarshal(t, fresh)) {
		t.Fatal("stale step + flush differs from an ordinary step")
	}

	// Without the flush, step 2 gathers rows without step 1's update.
	again, _ := New(cfg)
	if _, err := again.Step(b1); err != nil {
		t.Fatal(err)
	}
	ra, _ := again.Step(b2)
	rf, _ := fresh.Step(b2)
	if ra.Loss == rf.Loss {
		t.Fatal("step 2 of the stale model saw step 1's embedding update")
	}
	if _, err := again.Step(b3); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Step(b3); err != nil {
		t.Fatal(err)
	}
	if string(mustMarshal(t, again)) == string(mustMarshal(t, fresh)) {
		t.Fatal("stale and ordinary training give the same parameters")
	}
}

// TestStaleGradientsLossFalls trains with one-step-stale embedding
// gradients on generated Ads events (paper V.C: stale gradients "did not
// impact model quality"): the held-out loss falls below its initial value
// and the base rate, and ends within 0.01 of ordinary training's.
func TestStaleGradientsLossFalls(t *testing.T) {
	f, train := adsExamples(t, "ctr_small", 1, 60000)
	_, held := adsExamples(t, "ctr_small", 2, 8000)
	losses := map[bool]float64{}
	var initial float64
	for _, stale := range []bool{false, true} {
		m, err := New(Config{Features: f, Vocab: 1 << 14, StaleEmbeddingGradients: stale})
		if err != nil {
			t.Fatal(err)
		}
		before, _ := m.Evaluate(held)
		initial = before.Loss
		const batch = 256
		for epoch := 0; epoch < 2; epoch++ {
			for i := 0; i+batch <= train.Len(); i += batch {
				if _, err := m.Step(train.Slice(i, i+batch)); err != nil {
					t.Fatal(err)
				}
			}
		}
		m.Flush()
		after, _ := m.Evaluate(held)
		losses[stale] = after.Loss
	}
	base := baseRateLoss(held)
	t.Logf("held-out loss: initial %.4f, ordinary %.4f, stale %.4f, base rate %.4f", initial, losses[false], losses[true], base)
	if !(losses[true] < initial-0.1) || !(losses[true] < base-0.005) {
		t.Errorf("stale training did not learn: %.4f (initial %.4f, base %.4f)", losses[true], initial, base)
	}
	if d := losses[true] - losses[false]; d > 0.01 {
		t.Errorf("stale training ends %.4f above ordinary training", d)
	}
}
