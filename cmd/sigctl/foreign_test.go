package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestRunForeignEncodings runs `sigctl run` over raw files that pyarrow (an
// Arrow implementation SIG does not contain; testdata/foreign/make_fixtures.py
// wrote them) wrote in the encodings other producers use for SIG's types:
// dictionary-encoded strings (int32 indices as Arrow JS writes them, int8,
// uint16), large_utf8 and string_view, and for list columns large_list,
// list_view and large_list_view of large_utf8 and string_view. Each file
// holds the same values as its set's plain file (utf8, list<utf8>), in
// several record batches, and the output must be byte for byte the plain
// file's: the graphs include inputs a kernel passes through unchanged
// (lower of lower-case ASCII, truncate of short lists), whose bytes are the
// converted column's own.
func TestRunForeignEncodings(t *testing.T) {
	dir := t.TempDir()
	sets := []struct {
		graph, schema, plain string
		files                []string
	}{
		{graph: `let q = unigrams(lower(col("query")))
input q_ids = hash(q, buckets=1000)
input title = unigrams(col("ad_title"))
input cat = fill_missing(col("ad_category"), default="none")
input country = lower(col("country"))
input cat_adv = cross(col("ad_category"), col("advertiser_id"), buckets=1000)
`, plain: "ads_utf8.arrow", files: []string{"ads_dict_int32.arrow", "ads_dict_small.arrow", "ads_large_utf8.arrow", "ads_string_view.arrow"}},
		{graph: `input tags = dedupe(col("tags"))
input n_tags = length(col("tags"))
input tag_ids = hash(col("tags"), buckets=1000)
input some_tags = truncate(col("tags"), max=100)
input nums = hash(col("nums"), buckets=100)
input first_nums = truncate(col("nums"), max=100)
`, schema: "testdata/foreign/lists.schema.json", plain: "lists_list.arrow",
			files: []string{"lists_large_list.arrow", "lists_list_view.arrow", "lists_large_list_view.arrow"}},
	}
	for _, set := range sets {
		graph := filepath.Join(dir, set.plain+".sig")
		if err := os.WriteFile(graph, []byte(set.graph), 0o644); err != nil {
			t.Fatal(err)
		}
		run := func(raw string) []byte {
			t.Helper()
			out := filepath.Join(dir, raw+".out")
			args := []string{"run", graph, "--raw", filepath.Join("testdata/foreign", raw), "--out", out}
			if set.schema != "" {
				args = append(args, "--schema", set.schema)
			}
			if code, _, errOut := runSigctl(t, args...); code != 0 {
				t.Fatalf("%s: exit %d: %s", raw, code, errOut)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		want := run(set.plain)
		for _, f := range set.files {
			if got := run(f); !bytes.Equal(got, want) {
				t.Errorf("%s: output of %d bytes differs from %s's (%d bytes)", f, len(got), set.plain, len(want))
			}
		}
	}
}
