package pebbleutil_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/internal/pebbleutil"
)

// TestCollector: each store's figures are exported labelled with its name,
// from the store itself (a real Pebble database on disk).
func TestCollector(t *testing.T) {
	db, err := pebbleutil.Open(t.TempDir(), pebbleutil.DurabilityProcess, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 1000 {
		if err := db.Set([]byte(fmt.Sprintf("k%04d", i)), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(pebbleutil.Collector(pebbleutil.Store{Name: "cache", Metrics: db.Metrics})); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "cache" {
				t.Fatalf("%s: labels %v, want store=cache", mf.GetName(), m.GetLabel())
			}
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if len(got) != 10 {
		t.Errorf("%d metrics, want 10: %v", len(got), got)
	}
	// 1000 values of 100 bytes, flushed to an sstable.
	if got["sig_pebble_table_bytes"] <= 0 || got["sig_pebble_disk_bytes"] < got["sig_pebble_table_bytes"] || got["sig_pebble_flushes_total"] < 1 {
		t.Errorf("table %v bytes, disk %v bytes, %v flushes; want an sstable after the flush",
			got["sig_pebble_table_bytes"], got["sig_pebble_disk_bytes"], got["sig_pebble_flushes_total"])
	}
}
