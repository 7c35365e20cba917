package catalog

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
)

// TestDecodeCacheBudget: the decode cache never holds more stored bytes than
// its budget, however many entries pass through it, an entry larger than
// the whole budget is decoded but not kept, and every decode is right.
func TestDecodeCacheBudget(t *testing.T) {
	c := &Catalog{decodeBudget: 4 << 10}
	for i := range 500 {
		want := block.Meta{ID: fmt.Sprintf("b%04d", i), Source: "ads", Rows: int64(i)}
		for j := range i % 7 {
			want.Columns = append(want.Columns, block.Column{Name: fmt.Sprintf("c%d", j), Type: "int64"})
		}
		v, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a miss, then a hit
			got, err := c.decode(v)
			if err != nil || got.ID != want.ID || got.Rows != want.Rows || len(got.Columns) != len(want.Columns) {
				t.Fatalf("decode %s: %+v, %v", v, got, err)
			}
			if _, ok := c.decoded[string(v)]; !ok {
				t.Fatalf("decode %s: not cached", v)
			}
		}
		sum := 0
		for k := range c.decoded {
			sum += len(k)
		}
		if sum != c.decodedBytes || c.decodedBytes > c.decodeBudget {
			t.Fatalf("after %d entries: %d bytes cached (counted %d), budget %d", i+1, sum, c.decodedBytes, c.decodeBudget)
		}
	}
	// An entry over the whole budget is decoded but not kept, and does not
	// empty the cache.
	before := len(c.decoded)
	big, _ := json.Marshal(block.Meta{ID: "big", Source: string(make([]byte, 8<<10))})
	if m, err := c.decode(big); err != nil || m.ID != "big" {
		t.Fatal(m, err)
	}
	if _, ok := c.decoded[string(big)]; ok || len(c.decoded) != before {
		t.Fatalf("an entry of %d bytes (budget %d): cached %v, %d entries kept of %d", len(big), c.decodeBudget, ok, len(c.decoded), before)
	}
}
