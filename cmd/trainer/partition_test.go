package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestPartitionJSON(t *testing.T) {
	for _, solver := range []string{"heuristic", "exact"} {
		var out, errb bytes.Buffer
		code := runMain([]string{"partition", "--config", "testdata/partition_worked_example.json", "--solver", solver, "--json"}, &out, &errb)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", solver, code, errb.String())
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: output is not JSON: %v\n%s", solver, err, out.String())
		}
		for _, f := range []string{"load_imbalance", "bound", "gap", "max_hbm_bytes_per_chip", "solve_ms", "cost_ns", "shards", "layouts", "row_sharding"} {
			if _, ok := got[f]; !ok {
				t.Errorf("%s: output has no %q", solver, f)
			}
		}
		if li, _ := got["load_imbalance"].(float64); math.Abs(li-1) > 1e-9 {
			t.Errorf("%s: load_imbalance %v, want 1 (paper VII.D)", solver, got["load_imbalance"])
		}
		if rs, _ := got["row_sharding"].(map[string]any); rs == nil || math.Abs(rs["load_imbalance"].(float64)-2) > 1e-9 {
			t.Errorf("%s: row_sharding %v, want load imbalance 2", solver, got["row_sharding"])
		}
		if b, c := got["bound"].(float64), got["cost_ns"].(float64); !(b > 0 && b <= c) {
			t.Errorf("%s: bound %v, cost %v", solver, b, c)
		}
		shards, _ := got["shards"].([]any)
		seen := map[float64]bool{}
		for _, s := range shards {
			sh := s.(map[string]any)
			sc, ok := sh["sparsecore"].(float64)
			if !ok || sh["table"] == nil || sh["col_from"] == nil || sh["col_to"] == nil {
				t.Fatalf("%s: shard %v lacks its assignment", solver, sh)
			}
			seen[sc] = true
		}
		if len(shards) != 4 || len(seen) != 4 {
			t.Errorf("%s: %d shards on %d SparseCores, want 4 on 4", solver, len(shards), len(seen))
		}
	}
}

func TestPartitionReadable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain([]string{"partition", "--config", "testdata/partition_worked_example.json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"load imbalance 1.0000", "row sharding: 2.0000", "T1", "column", "[0,32)->", "SPARSECORE"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPartitionErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"bad optimizer", []string{"--config", "testdata/partition_bad_optimizer.json"}, 1, []string{`table "query_ids"`, `unknown optimizer "adamw"`}},
		{"out of memory", []string{"--config", "testdata/partition_too_big.json", "--json"}, 1, []string{"out of memory", `table "huge"`}},
		{"missing file", []string{"--config", "testdata/nonexistent.json"}, 1, []string{"nonexistent.json"}},
		{"no config", nil, 2, []string{"--config is required"}},
		{"unknown solver", []string{"--config", "testdata/partition_worked_example.json", "--solver", "ilp"}, 2, []string{`unknown solver "ilp"`}},
		{"unknown flag", []string{"--config", "testdata/partition_worked_example.json", "--fast"}, 2, []string{"fast"}},
		{"stray argument", []string{"--config", "testdata/partition_worked_example.json", "extra"}, 2, []string{`"extra"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runMain(append([]string{"partition"}, c.args...), &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errb.String())
			}
			for _, w := range c.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q does not mention %q", errb.String(), w)
				}
			}
			if out.Len() != 0 {
				t.Errorf("stdout not empty on failure: %q", out.String())
			}
		})
	}
}

func TestDispatcher(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain(nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "partition") {
		t.Errorf("no arguments: exit %d, usage %q; want 2 and a usage listing partition", code, errb.String())
	}
	errb.Reset()
	if code := runMain([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := runMain([]string{"help"}, &out, &errb); code != 0 {
		t.Errorf("help: exit %d", code)
	}
}
