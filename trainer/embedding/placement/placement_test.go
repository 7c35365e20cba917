package placement

import (
	"strings"
	"testing"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
)

// TestFeatureKeys: a sparse input's statistics key is its component key,
// parsed where the read solution enters; an input without one has the zero
// key (nothing read or published for it), and one that does not parse is
// an error naming the input and the field.
func TestFeatureKeys(t *testing.T) {
	k := canon.Key{0xab, 1}
	in := func(name, key string) *sigv1.InputSolution {
		return &sigv1.InputSolution{Input: name, ComponentKey: key, Type: "list<int64>"}
	}
	dense := &sigv1.InputSolution{Input: "price", ComponentKey: "not a key either", Type: "float64"}
	inputs := []*sigv1.InputSolution{in("ads", k.String()), dense, in("old", "")}
	f, err := model.NewFeatures([]model.Input{{Name: "ads", Type: transform.ListInt64}, {Name: "price", Type: transform.Float64}, {Name: "old", Type: transform.ListInt64}})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := FeatureKeys(inputs, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != k || keys[1] != (canon.Key{}) {
		t.Fatalf("keys of the sparse inputs %v: %v, want [%s, zero]", f.Sparse, keys, k)
	}
	bad := []*sigv1.InputSolution{in("ads", k.String()[:10])}
	if f, err = model.NewFeatures([]model.Input{{Name: "ads", Type: transform.ListInt64}}); err != nil {
		t.Fatal(err)
	}
	if _, err := FeatureKeys(bad, f); err == nil || !strings.Contains(err.Error(), `"ads"`) || !strings.Contains(err.Error(), "component_key") {
		t.Fatalf("a component key that does not parse: %v, want an error naming the input and the field", err)
	}
}
