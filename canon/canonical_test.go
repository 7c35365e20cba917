package canon

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/transform"
)

// The files of testdata/canon are github.com/cockroachdb/datadriven scripts,
// a case a pair of graphs:
//
//	# what the case is about
//	compare x
//	let q = unigrams(lower(col("query")))
//	input x = intersect(q, q)
//	---
//	input x = dedupe(unigrams(lower(col("query"))))
//	----
//	equal
//
// The output says whether input x gets the same component key in both
// graphs ("equal") or not ("differ"). go test -rewrite rewrites the outputs
// from what the code says (then read the diff).

type canonCase struct {
	name string // file:line of the case
	a, b string
}

// canonGraphs splits a compare case's input into its two graphs.
func canonGraphs(t testing.TB, td *datadriven.TestData) (a, b string) {
	a, b, ok := strings.Cut(td.Input, "\n---\n")
	if !ok || strings.Contains(b, "\n---\n") {
		td.Fatalf(t, "want two graphs separated by a line ---")
	}
	return a + "\n", b + "\n"
}

// readCanonCases reads the graphs of every case, for the tests that check
// properties of them rather than the cases' outputs.
func readCanonCases(t testing.TB) []canonCase {
	files, err := filepath.Glob("testdata/canon/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	var cases []canonCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Read from a string: reading never rewrites the case files.
		datadriven.RunTestFromStringAny(t, string(data), func(t testing.TB, td *datadriven.TestData) string {
			a, b := canonGraphs(t, td)
			cases = append(cases, canonCase{name: f + strings.TrimPrefix(td.Pos, "<string>"), a: a, b: b})
			return td.Expected
		})
	}
	return cases
}

func canon(t testing.TB, src string) *Canonical {
	t.Helper()
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	c, err := Canonicalize(g, transform.AdsSchema(), transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatalf("canonicalize: %v\n%s", err, src)
	}
	return c
}

func TestCanonicalCases(t *testing.T) {
	var nEqual, nDiffer int
	datadriven.Walk(t, "testdata/canon", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "compare" || len(td.CmdArgs) != 1 || len(td.CmdArgs[0].Vals) != 0 {
				td.Fatalf(t, "want compare <input>")
			}
			input := td.CmdArgs[0].Key
			a, b := canonGraphs(t, td)
			ca, cb := canon(t, a), canon(t, b)
			xa, ok := ca.Component(input)
			xb, ok2 := cb.Component(input)
			if !ok || !ok2 {
				td.Fatalf(t, "a graph has no input %s", input)
			}
			got := "differ"
			if xa.Key == xb.Key {
				got = "equal"
				nEqual++
			} else {
				nDiffer++
			}
			if !td.Rewrite && got != strings.TrimSpace(td.Expected) {
				// What the outputs cannot show: the two components.
				t.Logf("%s:\n%s\n  %s\nvs\n%s\n  %s", td.Pos, ca.DSL(xa, input), xa.Key, cb.DSL(xb, input), xb.Key)
			}
			return got
		})
	})
	if !t.Failed() && (nEqual < 20 || nDiffer < 15) {
		t.Fatalf("too few cases read: %d equal, %d differ", nEqual, nDiffer)
	}
}

// The canonical form is a fixed point: canonicalizing it again changes
// nothing.
func TestCanonicalIdempotent(t *testing.T) {
	for _, tc := range readCanonCases(t) {
		for _, src := range []string{tc.a, tc.b} {
			c1 := canon(t, src)
			c2, err := Canonicalize(c1.Graph(), transform.AdsSchema(), transform.Default(), transform.Limits{})
			if err != nil {
				t.Fatalf("%s: re-canonicalize: %v", tc.name, err)
			}
			assertSameComponents(t, tc.name, c1, c2)
			// And through the canonical DSL text.
			for i := range c1.Components {
				comp := &c1.Components[i]
				c3 := canon(t, c1.DSL(comp, comp.Input))
				if c3.Components[0].Key != comp.Key || len(c3.Components[0].Nodes) != len(comp.Nodes) {
					t.Errorf("%s: canonical DSL of %s does not reproduce its key:\n%s", tc.name, comp.Input, c1.DSL(comp, comp.Input))
				}
			}
		}
	}
}

func assertSameComponents(t *testing.T, name string, c1, c2 *Canonical) {
	t.Helper()
	if len(c1.Components) != len(c2.Components) {
		t.Fatalf("%s: %d components, then %d", name, len(c1.Components), len(c2.Components))
	}
	for i := range c1.Components {
		a, b := c1.Components[i], c2.Components[i]
		if a.Key != b.Key || len(a.Nodes) != len(b.Nodes) || a.Input != b.Input {
			t.Errorf("%s: component %s changed: %s (%d nodes) -> %s (%d nodes)", name, a.Input, a.Key.Short(), len(a.Nodes), b.Key.Short(), len(b.Nodes))
		}
	}
}

func TestVersionBumpChangesKeys(t *testing.T) {
	src := `
input a = unigrams(lower(col("query")))
input b = unigrams(col("query"))
input c = hash(lower(col("country")), buckets=10)
`
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	s := transform.AdsSchema()
	c1, err := Canonicalize(g, s, transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Canonicalize(g, s, transform.Default().WithVersion("lower", 2), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true} {
		changed := c1.Components[i].Key != c2.Components[i].Key
		if changed != want {
			t.Errorf("input %s: changed=%v after bumping lower, want %v", c1.Components[i].Input, changed, want)
		}
	}
}

func TestSchemaFingerprintInKey(t *testing.T) {
	src := "input x = unigrams(col(\"query\"))\n"
	g, _ := transform.Parse([]byte(src), "", transform.Limits{})
	s1 := transform.AdsSchema()
	s2 := transform.AdsSchema()
	s2.Fields = append(s2.Fields, transform.Field{Name: "extra", Type: transform.String})
	s3 := transform.AdsSchema()
	s3.Source = "other"
	var keys []Key
	for _, s := range []*transform.Schema{s1, s2, s3} {
		c, err := Canonicalize(g, s, transform.Default(), transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, c.Components[0].Key)
	}
	if keys[0] == keys[1] || keys[0] == keys[2] || keys[1] == keys[2] {
		t.Fatalf("schema changes must change the key: %v", keys)
	}
}

// Keys are stable across runs, machines and releases: the golden file pins
// them. A change here invalidates every memoized block in every deployment,
// so it must only ever happen together with a deliberate format change.
func TestKeysGolden(t *testing.T) {
	n := 0
	datadriven.RunTest(t, "testdata/keys.txt", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "key" {
			td.Fatalf(t, "unknown command %q", td.Cmd)
		}
		got, _, err := KeyOf(td.Input, transform.AdsSchema(), transform.Default())
		if err != nil {
			td.Fatalf(t, "%s: %v", td.Input, err)
		}
		n++
		return got.String()
	})
	if !t.Failed() && n < 5 {
		t.Fatalf("only %d golden keys", n)
	}
}

var letRe = regexp.MustCompile(`^let ([A-Za-z_][A-Za-z0-9_]*) = `)

// renameAndShuffle rewrites printed DSL with fresh let names and a random
// statement order: neither may change any key.
func renameAndShuffle(src string, rng *rand.Rand) string {
	lines := strings.Split(strings.TrimSpace(src), "\n")
	names := map[string]string{}
	for _, l := range lines {
		if m := letRe.FindStringSubmatch(l); m != nil {
			names[m[1]] = fmt.Sprintf("v%d_%d", rng.Intn(1000), len(names))
		}
	}
	// Replace longest names first so that a name that is a prefix of another
	// is not replaced inside it.
	old := make([]string, 0, len(names))
	for n := range names {
		old = append(old, n)
	}
	sort.Slice(old, func(i, j int) bool { return len(old[i]) > len(old[j]) })
	identRe := regexp.MustCompile(`"[^"]*"|[A-Za-z_][A-Za-z0-9_]*`)
	for i, l := range lines {
		lines[i] = identRe.ReplaceAllStringFunc(l, func(tok string) string {
			if nn, ok := names[tok]; ok {
				return nn
			}
			return tok
		})
	}
	rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	return strings.Join(lines, "\n") + "\n"
}

func checkInvariants(t testing.TB, src []byte, seed int64) {
	g, err := transform.Parse(src, "", transform.Limits{})
	if err != nil {
		return
	}
	s := transform.AdsSchema()
	c1, err := Canonicalize(g, s, transform.Default(), transform.Limits{})
	if err != nil {
		return
	}
	c2, err := Canonicalize(c1.Graph(), s, transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatalf("canonical graph does not check: %v\n%s", err, transform.Print(c1.Graph()))
	}
	for i := range c1.Components {
		if c1.Components[i].Key != c2.Components[i].Key {
			t.Fatalf("canonicalizing twice changed %s\n%s", c1.Components[i].Input, src)
		}
	}
	// Let names in the user's graph: rename them all and reorder statements.
	checked := g.Clone()
	if _, err := transform.Check(checked, s, transform.Default(), transform.Limits{}); err != nil {
		t.Fatal(err)
	}
	printed := transform.Print(checked)
	shuffled := renameAndShuffle(printed, rand.New(rand.NewSource(seed)))
	g3, err := transform.Parse([]byte(shuffled), "", transform.Limits{})
	if err != nil {
		t.Fatalf("renamed graph does not parse: %v\n%s", err, shuffled)
	}
	c3, err := Canonicalize(g3, s, transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatalf("renamed graph does not check: %v\n%s", err, shuffled)
	}
	for i := range c1.Components {
		k3, ok := c3.Component(c1.Components[i].Input)
		if !ok || k3.Key != c1.Components[i].Key {
			t.Fatalf("renaming/reordering changed the key of %s\nbefore:\n%s\nafter:\n%s", c1.Components[i].Input, printed, shuffled)
		}
	}
}

func TestRenameAndReorderProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, tc := range readCanonCases(t) {
		for _, src := range []string{tc.a, tc.b} {
			for k := 0; k < 5; k++ {
				checkInvariants(t, []byte(src), rng.Int63())
			}
		}
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, tc := range readCanonCases(f) {
		f.Add([]byte(tc.a), int64(1))
		f.Add([]byte(tc.b), int64(2))
	}
	f.Fuzz(func(t *testing.T, src []byte, seed int64) {
		if len(src) > 1<<14 {
			return
		}
		checkInvariants(t, src, seed)
	})
}

// TestKeyText: a key in JSON is its hex string (the matching cache's
// records hold keys so), and decoding refuses what ParseKey refuses.
func TestKeyText(t *testing.T) {
	var k Key
	for i := range k {
		k[i] = byte(i * 7)
	}
	b, err := json.Marshal(struct{ K Key }{k})
	if err != nil || string(b) != `{"K":"`+k.String()+`"}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var back struct{ K Key }
	if err := json.Unmarshal(b, &back); err != nil || back.K != k {
		t.Fatalf("unmarshal: %v, %v", back.K, err)
	}
	for _, bad := range []string{`{"K":"zz"}`, `{"K":"` + k.String()[:62] + `"}`, `{"K":""}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: decoded", bad)
		}
	}
}

// TestConeIsAComponent: the cone of any node, canonicalized on its own from
// its canonical DSL, has that node's key, so a memo node of a cover is
// memoized, found and read under the key it has inside every graph that
// contains it; the residual DSL writes memo nodes as memo("<prefix>").
func TestConeIsAComponent(t *testing.T) {
	src := `
let q = unigrams(lower(col("query")))
input a = hash(q, buckets=1000)
input b = concat(intersect(q, unigrams(lower(col("ad_title")))), col("ad_category"))
`
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	s, reg := transform.AdsSchema(), transform.Default()
	c, err := Canonicalize(g, s, reg, transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		cone := c.Cone(i, "out")
		k, _, err := KeyOf(strings.TrimPrefix(c.DSL(&cone, "out"), "input out = "), s, reg)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if k != c.Nodes[i].Key || cone.Key != k {
			t.Fatalf("node %d (%s): cone key %s, canonicalized alone %s", i, c.Nodes[i].Op, cone.Key.Short(), k.Short())
		}
		if j, ok := c.NodeIndex(k); !ok || j != i {
			t.Fatalf("NodeIndex(%s) = %d, %v", k.Short(), j, ok)
		}
	}
	a := &c.Components[0]
	q := c.Nodes[a.Root].Inputs[0]
	if got, want := c.ResidualDSL(a, map[int]bool{q: true}), `hash(memo("`+c.Nodes[q].Key.Short()+`"), buckets=1000, salt=0)`; got != want {
		t.Fatalf("residual %s, want %s", got, want)
	}
}

// TestResidualOverEveryNodeKind (issue 27): whichever node is given — a
// bare column (read by one user or two), a node constant folding made, a
// node with two users, a root — the residual (Residual, compiled by
// transform.CompileResidual as workers and readers compile it) takes that
// node's column and reads exactly the raw columns of the nodes reached
// without passing through it: never a column only the given node read.
func TestResidualOverEveryNodeKind(t *testing.T) {
	c := canon(t, `
input dev = col("device")
input ok = hash(col("device"), buckets=16)
input devs = cross(col("device"), hash(col("device"), buckets=16), buckets=97)
input folded = truncate(truncate(unigrams(lower(lower(col("query")))), max=8), max=3)
input grams = union(ngrams(col("ad_title"), n=1), union(unigrams(col("ad_category")), unigrams(col("ad_title"))))
input twice = concat(unigrams(lower(col("country"))), ngrams(lower(col("country")), n=2))
`)
	s, reg := transform.AdsSchema(), transform.Default()
	live := map[int]bool{}
	for _, comp := range c.Components {
		for _, j := range comp.Nodes {
			live[j] = true
		}
	}
	for _, j := range slices.Sorted(maps.Keys(live)) {
		memo := map[int]bool{j: true}
		// The raw columns reached from the roots without passing through
		// the memo node.
		want := []string{transform.ColEventID}
		seen := map[int]bool{}
		var walk func(i int)
		walk = func(i int) {
			if seen[i] || memo[i] {
				return
			}
			seen[i] = true
			n := &c.Nodes[i]
			if v, ok := paramOf(n.Params, "name"); ok && n.Op == "col" && !slices.Contains(want, v.Str) {
				want = append(want, v.Str)
			}
			for _, k := range n.Inputs {
				walk(k)
			}
		}
		for _, comp := range c.Components {
			walk(comp.Root)
		}
		sort.Strings(want[1:])
		g, given, types := c.Residual(memo)
		gi, ok := given[j]
		if !ok || len(given) != 1 {
			t.Fatalf("node %d (%s): given %v, want the node alone", j, c.Nodes[j].Op, given)
		}
		if len(g.Nodes[gi].Inputs) != 0 {
			t.Errorf("node %d (%s): the given node keeps its inputs", j, c.Nodes[j].Op)
		}
		p, err := transform.CompileResidual(g, types, []int{gi}, s, reg)
		if err != nil {
			t.Fatalf("node %d (%s): %v", j, c.Nodes[j].Op, err)
		}
		if got := p.Columns(); !slices.Equal(got, want) {
			cone := c.Cone(j, "n")
			t.Errorf("node %d (%s) given: the residual reads %v, want %v", j, c.DSL(&cone, "n"), got, want)
		}
	}
}
