package partition

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodTopology = `"topology": {"chips": 2, "sparsecores_per_chip": 4, "hbm_bytes_per_chip": 1000000000}`

func cfg(tables, rest string) string {
	if rest == "" {
		rest = goodTopology + `, "batch_size": 128`
	}
	return `{"tables": [` + tables + `], ` + rest + `}`
}

const goodTable = `{"name": "q", "vocab": 1000, "dim": 16, "valency": 2, "zipf_s": 1.1, "optimizer": "adagrad"}`

func TestParseConfigGood(t *testing.T) {
	p, err := ParseConfig([]byte(cfg(goodTable+`, {"name": "r", "vocab": 10, "dim": 4, "valency_dist": [{"valency": 1, "weight": 3}, {"valency": 5, "weight": 1}],
		"row_freq": [1,2,3,4,5,6,7,8,9,10], "optimizer": "lamb", "bytes_per_element": 2,
		"measured": {"mean_valency": 2.5, "unique_per_batch": 7}}`,
		`"topology": {"chips": 1, "sparsecores_per_chip": 2, "hbm_bytes_per_chip": 5000000, "hbm_bytes_per_sec_per_chip": 1e11,
		 "access_granularity_bytes": 32, "lookup_overhead_ns": 0, "shard_overhead_ns": 250}, "batch_size": 64`)))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Tables[1]
	if r.Optimizer.ElementWise || r.BytesPerElement != 2 || len(r.Valency.Dist) != 2 || r.Measured.UniquePerBatch != 7 || len(r.Access.RowFreq) != 10 {
		t.Errorf("table r parsed as %+v", r)
	}
	top := p.Topology
	if top.HBMBandwidth != 1e11 || top.AccessGranularity != 32 || top.LookupOverheadNS != 0 || top.ShardOverheadNS != 250 || p.BatchSize != 64 {
		t.Errorf("topology parsed as %+v", top)
	}
	// Absent optional fields take the documented defaults.
	p, err = ParseConfig([]byte(cfg(goodTable, "")))
	if err != nil {
		t.Fatal(err)
	}
	top = p.Topology
	if top.HBMBandwidth != DefaultHBMBandwidth || top.AccessGranularity != DefaultAccessGranularity ||
		top.LookupOverheadNS != DefaultLookupOverheadNS || top.ShardOverheadNS != DefaultShardOverheadNS {
		t.Errorf("defaults not applied: %+v", top)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name   string
		config string
		want   []string // substrings of the error
		oom    bool     // ErrOutOfMemory instead of ErrInvalidProblem
	}{
		{"zero vocab", cfg(`{"name": "q", "vocab": 0, "dim": 16, "valency": 2, "optimizer": "sgd"}`, ""), []string{`table "q"`, "vocab"}, false},
		{"negative vocab", cfg(`{"name": "q", "vocab": -5, "dim": 16, "valency": 2, "optimizer": "sgd"}`, ""), []string{`table "q"`, "vocab", "-5"}, false},
		{"zero dim", cfg(`{"name": "q", "vocab": 10, "dim": 0, "valency": 2, "optimizer": "sgd"}`, ""), []string{`table "q"`, "dim"}, false},
		{"negative dim", cfg(`{"name": "q", "vocab": 10, "dim": -1, "valency": 2, "optimizer": "sgd"}`, ""), []string{`table "q"`, "dim"}, false},
		{"zero valency", cfg(`{"name": "q", "vocab": 10, "dim": 4, "valency": 0, "optimizer": "sgd"}`, ""), []string{`table "q"`, "valency"}, false},
		{"negative valency", cfg(`{"name": "q", "vocab": 10, "dim": 4, "valency": -2, "optimizer": "sgd"}`, ""), []string{`table "q"`, "valency"}, false},
		{"zero bytes per element", cfg(`{"name": "q", "vocab": 10, "dim": 4, "valency": 1, "optimizer": "sgd", "bytes_per_element": 0}`, ""), []string{`table "q"`, "bytes_per_element"}, false},
		{"unknown optimizer", cfg(`{"name": "q", "vocab": 10, "dim": 4, "valency": 1, "optimizer": "adamw"}`, ""), []string{`table "q"`, `unknown optimizer "adamw"`, "adagrad"}, false},
		{"missing optimizer", cfg(`{"name": "q", "vocab": 10, "dim": 4, "valency": 1}`, ""), []string{`table "q"`, "optimizer is required"}, false},
		{"missing name", cfg(`{"vocab": 10, "dim": 4, "valency": 1, "optimizer": "sgd"}`, ""), []string{"tables[0]", "name"}, false},
		{"duplicate name", cfg(goodTable+", "+goodTable, ""), []string{"duplicate", `"q"`}, false},
		{"unknown table field", cfg(`{"name": "q", "vocb": 10, "dim": 4, "valency": 1, "optimizer": "sgd"}`, ""), []string{`table "q"`, `unknown field "vocb"`}, false},
		{"unknown measured field", cfg(`{"name": "q", "vocab": 10, "dim": 4, "valency": 1, "optimizer": "sgd", "measured": {"uniques": 3}}`, ""), []string{`table "q"`, `unknown field "uniques"`}, false},
		{"unknown top-level field", `{"tables": [` + goodTable + `], ` + goodTopology + `, "batch_size": 8, "batchsize": 8}`, []string{`unknown field "batchsize"`}, false},
		{"unknown topology field", cfg(goodTable, `"topology": {"chips": 1, "sparsecores_per_chip": 4, "hbm_bytes_per_chip": 1000000, "hbm_gb": 16}, "batch_size": 8`), []string{"topology", `unknown field "hbm_gb"`}, false},
		{"wrong type", cfg(`{"name": "q", "vocab": "many", "dim": 4, "valency": 1, "optimizer": "sgd"}`, ""), []string{`table "q"`, "vocab"}, false},
		{"zero chips", cfg(goodTable, `"topology": {"chips": 0, "sparsecores_per_chip": 4, "hbm_bytes_per_chip": 1000000}, "batch_size": 8`), []string{"topology", "chips"}, false},
		{"negative sparsecores", cfg(goodTable, `"topology": {"chips": 1, "sparsecores_per_chip": -4, "hbm_bytes_per_chip": 1000000}, "batch_size": 8`), []string{"topology", "sparsecores_per_chip"}, false},
		{"zero hbm", cfg(goodTable, `"topology": {"chips": 1, "sparsecores_per_chip": 4, "hbm_bytes_per_chip": 0}, "batch_size": 8`), []string{"topology", "hbm_bytes_per_chip"}, false},
		{"negative bandwidth", cfg(goodTable, `"topology": {"chips": 1, "sparsecores_per_chip": 4, "hbm_bytes_per_chip": 1000000, "hbm_bytes_per_sec_per_chip": -1}, "batch_size": 8`), []string{"hbm_bytes_per_sec_per_chip"}, false},
		{"negative overhead", cfg(goodTable, `"topology": {"chips": 1, "sparsecores_per_chip": 4, "hbm_bytes_per_chip": 1000000, "shard_overhead_ns": -1}, "batch_size": 8`), []string{"shard_overhead_ns"}, false},
		{"missing topology", `{"tables": [` + goodTable + `], "batch_size": 8}`, []string{"topology is required"}, false},
		{"zero batch", cfg(goodTable, goodTopology+`, "batch_size": 0`), []string{"batch_size"}, false},
		{"negative batch", cfg(goodTable, goodTopology+`, "batch_size": -3`), []string{"batch_size"}, false},
		{"no tables", `{"tables": [], ` + goodTopology + `, "batch_size": 8}`, []string{"at least one table"}, false},
		{"zipf and row_freq", cfg(`{"name": "q", "vocab": 2, "dim": 4, "valency": 1, "optimizer": "sgd", "zipf_s": 1, "row_freq": [1, 2]}`, ""), []string{`table "q"`, "zipf_s or row_freq"}, false},
		{"nonpositive zipf", cfg(`{"name": "q", "vocab": 2, "dim": 4, "valency": 1, "optimizer": "sgd", "zipf_s": 0}`, ""), []string{`table "q"`, "zipf_s"}, false},
		{"row_freq length", cfg(`{"name": "q", "vocab": 3, "dim": 4, "valency": 1, "optimizer": "sgd", "row_freq": [1, 2]}`, ""), []string{`table "q"`, "row_freq", "vocab=3"}, false},
		{"negative row_freq", cfg(`{"name": "q", "vocab": 2, "dim": 4, "valency": 1, "optimizer": "sgd", "row_freq": [1, -2]}`, ""), []string{`table "q"`, "row_freq[1]"}, false},
		{"row_lookups above one", cfg(`{"name": "q", "vocab": 2, "dim": 4, "valency": 1, "optimizer": "sgd", "measured": {"row_lookups": [0.5, 1.5]}}`, ""), []string{`table "q"`, "measured.row_lookups[1]"}, false},
		{"unique above vocab", cfg(`{"name": "q", "vocab": 2, "dim": 4, "valency": 1, "optimizer": "sgd", "measured": {"unique_per_batch": 3}}`, ""), []string{`table "q"`, "measured.unique_per_batch"}, false},
		{"valency disagrees with dist", cfg(`{"name": "q", "vocab": 2, "dim": 4, "valency": 9, "valency_dist": [{"valency": 1, "weight": 1}], "optimizer": "sgd"}`, ""), []string{`table "q"`, "valency_dist"}, false},
		{"trailing data", cfg(goodTable, "") + ` {}`, []string{"trailing data"}, false},
		{"empty", ``, []string{"empty"}, false},
		{"not json", `tables: []`, []string{"config"}, false},
		{"table larger than all HBM", cfg(`{"name": "huge", "vocab": 100000000, "dim": 64, "valency": 1, "optimizer": "adam"}`, ""), []string{`table "huge"`, "more than all 2 chips"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.config))
			if err == nil {
				t.Fatal("no error")
			}
			want := ErrInvalidProblem
			if c.oom {
				want = ErrOutOfMemory
			}
			if !errors.Is(err, want) {
				t.Errorf("error %q does not wrap %v", err, want)
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// Every example configuration parses and solves.
func TestExampleConfigs(t *testing.T) {
	files, err := filepath.Glob("../../../examples/partition/*.json")
	if err != nil || len(files) < 2 {
		t.Fatalf("example configs: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseConfig(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := Solve(p, Options{}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
