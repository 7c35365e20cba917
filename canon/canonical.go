package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sigdata/sig/transform"
)

// Key is a Merkle key: SHA-256 over a node's canonical form.
type Key [32]byte

func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Short is the first 12 hex digits, for humans.
func (k Key) Short() string { return k.String()[:12] }

// ParseKey parses a 64-digit hex key.
func ParseKey(s string) (Key, error) {
	var k Key
	if len(s) != 2*len(k) {
		return k, badKey(s)
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return Key{}, badKey(s)
	}
	return k, nil
}

func badKey(s string) error {
	return fmt.Errorf("invalid key %q: want %d hex digits", truncate(s, 80), 2*len(Key{}))
}

// MarshalText writes the key in hex, as String: records that store keys as
// JSON (the matching cache's) hold them as 64-digit strings.
func (k Key) MarshalText() ([]byte, error) {
	return hex.AppendEncode(make([]byte, 0, 2*len(k)), k[:]), nil
}

// UnmarshalText parses a key written by MarshalText (ParseKey): decoding a
// stored record is where its keys enter the process.
func (k *Key) UnmarshalText(b []byte) error {
	if len(b) != 2*len(k) {
		return badKey(string(b))
	}
	if _, err := hex.Decode(k[:], b); err != nil {
		*k = Key{}
		return badKey(string(b))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// CNode is a node of the canonical form.
type CNode struct {
	Op      string
	Version int
	// Params are explicit (defaults filled) and sorted by name.
	Params []transform.Param
	// Inputs index Canonical.Nodes; sorted by key for commutative ops.
	Inputs []int
	Type   transform.Type
	Key    Key
}

// Component is the connected component a model input consumes: the cone of
// canonical nodes its output depends on (paper IV.A: "each input to the
// model consumes the output of one connected component").
type Component struct {
	Input string // the model input's name in the submitted graph
	Key   Key    // the key of the root node
	Root  int    // index into Canonical.Nodes
	// Nodes is the cone in canonical order: a depth-first post-order from the
	// root, inputs in canonical order. It does not depend on how the graph
	// was written.
	Nodes   []int
	Columns []string // raw columns read, sorted
	Ops     []string // distinct ops, sorted
	Type    transform.Type
}

// Canonical is the canonical form of one graph: a hash-consed node table
// shared by all of its components, so a subexpression common to several
// inputs appears once.
type Canonical struct {
	Schema     *transform.Schema
	Nodes      []CNode
	Components []Component // one per model input, in the graph's input order
	byKey      map[Key]int
	buf        []byte // reused by nodeKey
}

// Canonicalize checks g against the schema and reduces it to canonical form.
// g is not modified.
func Canonicalize(g *transform.Graph, s *transform.Schema, reg *transform.Registry, lim transform.Limits) (*Canonical, error) {
	g = g.Clone()
	types, err := transform.Check(g, s, reg, lim)
	if err != nil {
		return nil, err
	}
	return canonicalizeChecked(g, types, s, reg)
}

func canonicalizeChecked(g *transform.Graph, types []transform.Type, s *transform.Schema, reg *transform.Registry) (*Canonical, error) {
	order, err := transform.TopoOrder(g)
	if err != nil {
		return nil, err
	}
	// Canonical nodes never outnumber the graph's: mk makes at most one
	// per graph node (a rewrite returns an existing node or makes one in
	// its place), so one allocation of each serves the whole graph.
	c := &Canonical{Schema: s, Nodes: make([]CNode, 0, len(g.Nodes)), byKey: make(map[Key]int, len(g.Nodes))}
	fp := s.Fingerprint()
	canon := make([]int, len(g.Nodes))
	// The canonical inputs of every node, carved out of one allocation
	// (capacity-capped, so no node's slice can grow into the next's).
	total := 0
	for i := range g.Nodes {
		total += len(g.Nodes[i].Inputs)
	}
	arena := make([]int, total)
	for _, i := range order {
		n := &g.Nodes[i]
		ins := arena[:len(n.Inputs):len(n.Inputs)]
		arena = arena[len(n.Inputs):]
		for k, j := range n.Inputs {
			ins[k] = canon[j]
		}
		canon[i] = c.mk(reg, fp, n.Op, n.Params, ins, types[i])
	}
	mark := make([]int32, len(c.Nodes))
	var scratch coneScratch
	c.Components = make([]Component, 0, len(g.Inputs))
	for k, in := range g.Inputs {
		c.Components = append(c.Components, c.component(in.Name, canon[in.Node], mark, int32(k+1), &scratch))
	}
	return c, nil
}

// mk returns the canonical node for op(params, inputs), applying the
// rewrite rules first. Every rule is an identity of the documented op
// semantics (transform/doc.go), so memoized outputs are unchanged by it:
//
//   - idempotent unary ops collapse: lower(lower(x)) = lower(x),
//     strip_punct(strip_punct(x)) = strip_punct(x), dedupe(dedupe(x)) = dedupe(x);
//   - dedupe of a set op is the set op: its output is already sorted, unique
//     and never null;
//   - truncate(truncate(x, max=a), max=b) = truncate(x, max=min(a, b));
//   - ngrams(s, n=1) = unigrams(s);
//   - associative ops are flattened: union(union(a, b), c) = union(a, b, c),
//     likewise intersect and concat (concat keeps operand order);
//   - inside union and intersect, dedupe(y) is y (they dedupe anyway and
//     both read null as empty);
//   - commutative inputs are sorted by key, and for the set ops duplicates
//     dropped: intersect(x, x) = intersect(x);
//   - a set op of one list is dedupe: union(x) = intersect(x) = dedupe(x).
func (c *Canonical) mk(reg *transform.Registry, fp, op string, params []transform.Param, ins []int, t transform.Type) int {
	spec, _ := reg.Op(op)
	if len(ins) == 1 {
		in := &c.Nodes[ins[0]]
		switch {
		case spec.Idempotent && in.Op == op:
			return ins[0]
		case op == "dedupe" && (in.Op == "union" || in.Op == "intersect"):
			return ins[0]
		case op == "ngrams":
			if v, _ := paramOf(params, "n"); v.Int == 1 {
				return c.mk(reg, fp, "unigrams", nil, ins, t)
			}
		case op == "truncate" && in.Op == "truncate":
			a, _ := paramOf(in.Params, "max")
			b, _ := paramOf(params, "max")
			m := transform.IntValue(min(a.Int, b.Int))
			return c.mk(reg, fp, op, []transform.Param{{Name: "max", Value: m}}, in.Inputs, t)
		}
	}
	isSet := op == "union" || op == "intersect"
	if spec.Associative || isSet {
		var flat []int
		for _, j := range ins {
			in := &c.Nodes[j]
			switch {
			case spec.Associative && in.Op == op:
				flat = append(flat, in.Inputs...)
			case isSet && in.Op == "dedupe":
				flat = append(flat, in.Inputs...)
			default:
				flat = append(flat, j)
			}
		}
		ins = flat
	}
	if spec.Commutative {
		ins = slices.Clone(ins)
		slices.SortFunc(ins, func(a, b int) int {
			return bytes.Compare(c.Nodes[a].Key[:], c.Nodes[b].Key[:])
		})
		if isSet {
			ins = slices.Compact(ins)
		}
	}
	if isSet && len(ins) == 1 && c.Nodes[ins[0]].Type.IsList() {
		return c.mk(reg, fp, "dedupe", nil, ins, t)
	}
	n := CNode{Op: op, Version: spec.Version, Params: normParams(params), Inputs: ins, Type: t}
	n.Key = c.nodeKey(&n, fp)
	if i, ok := c.byKey[n.Key]; ok {
		return i
	}
	c.Nodes = append(c.Nodes, n)
	c.byKey[n.Key] = len(c.Nodes) - 1
	return len(c.Nodes) - 1
}

func paramOf(ps []transform.Param, name string) (transform.Value, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p.Value, true
		}
	}
	return transform.Value{}, false
}

// normParams copies the parameters without positions, sorted by name.
func normParams(ps []transform.Param) []transform.Param {
	if len(ps) == 0 {
		return nil
	}
	out := make([]transform.Param, len(ps))
	for i, p := range ps {
		out[i] = transform.Param{Name: p.Name, Value: p.Value}
	}
	slices.SortFunc(out, func(a, b transform.Param) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nodeKey is the Merkle hash of a canonical node: SHA-256 of its encoding,
// in which every variable-length field is length-prefixed, so no two
// different nodes share an encoding.
func (c *Canonical) nodeKey(n *CNode, fp string) Key {
	b := c.buf[:0]
	str := func(b []byte, s string) []byte {
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	num := binary.BigEndian.AppendUint64
	b = str(b, "sig.node.v1")
	b = str(b, n.Op)
	b = num(b, uint64(n.Version))
	b = str(b, n.Type.String())
	if n.Op == "col" {
		b = str(b, fp)
	}
	b = num(b, uint64(len(n.Params)))
	for _, p := range n.Params {
		b = str(b, p.Name)
		b = num(b, uint64(p.Value.Kind))
		switch p.Value.Kind {
		case transform.KindInt:
			b = num(b, uint64(p.Value.Int))
		case transform.KindFloat:
			b = num(b, math.Float64bits(normFloat(p.Value.Float)))
		case transform.KindString:
			b = str(b, p.Value.Str)
		case transform.KindFloatList:
			b = num(b, uint64(len(p.Value.Floats)))
			for _, f := range p.Value.Floats {
				b = num(b, math.Float64bits(normFloat(f)))
			}
		}
	}
	b = num(b, uint64(len(n.Inputs)))
	for _, j := range n.Inputs {
		b = append(b, c.Nodes[j].Key[:]...)
	}
	c.buf = b
	return sha256.Sum256(b)
}

func normFloat(f float64) float64 {
	if f == 0 {
		return 0
	}
	if math.IsNaN(f) {
		return math.NaN()
	}
	return f
}

// coneScratch is the traversal state component reuses from one model input
// to the next: cones overlap, and growing fresh slices for each was most of
// canonicalization's garbage.
type coneScratch struct {
	stack []coneFrame
	nodes []int
}

type coneFrame struct{ node, next int }

func (c *Canonical) component(name string, root int, mark []int32, stamp int32, sc *coneScratch) Component {
	comp := Component{Input: name, Key: c.Nodes[root].Key, Root: root, Type: c.Nodes[root].Type}
	// Iterative post-order over the cone; mark[i] == stamp means visited,
	// so one mark array serves every component without clearing.
	stack := append(sc.stack[:0], coneFrame{root, 0})
	nodes := sc.nodes[:0]
	mark[root] = stamp
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		n := &c.Nodes[f.node]
		if f.next < len(n.Inputs) {
			j := n.Inputs[f.next]
			f.next++
			if mark[j] != stamp {
				mark[j] = stamp
				stack = append(stack, coneFrame{j, 0})
			}
			continue
		}
		nodes = append(nodes, f.node)
		// Few distinct ops and columns per component: a linear scan beats
		// collecting duplicates and sorting them.
		if !slices.Contains(comp.Ops, n.Op) {
			comp.Ops = append(comp.Ops, n.Op)
		}
		if n.Op == "col" {
			v, _ := paramOf(n.Params, "name")
			if !slices.Contains(comp.Columns, v.Str) {
				comp.Columns = append(comp.Columns, v.Str)
			}
		}
		stack = stack[:len(stack)-1]
	}
	sc.stack, sc.nodes = stack, nodes
	comp.Nodes = slices.Clone(nodes)
	slices.Sort(comp.Columns)
	slices.Sort(comp.Ops)
	return comp
}

// Component returns the component of model input name.
func (c *Canonical) Component(name string) (*Component, bool) {
	for i := range c.Components {
		if c.Components[i].Input == name {
			return &c.Components[i], true
		}
	}
	return nil, false
}

// NodeKeys returns the keys of every node of the component (for the search
// index: a component contains a subgraph when the subgraph's key is among
// them).
func (c *Canonical) NodeKeys(comp *Component) []Key {
	keys := make([]Key, len(comp.Nodes))
	for i, j := range comp.Nodes {
		keys[i] = c.Nodes[j].Key
	}
	return keys
}

// ComponentGraph returns the component as a standalone graph in canonical
// order with one model input named out. It is what a memoization task runs.
func (c *Canonical) ComponentGraph(comp *Component, out string) *transform.Graph {
	return c.graph(comp.Nodes, []transform.ModelInput{{Name: out, Node: comp.Root}})
}

// Graph returns all components as one graph (shared nodes once), with the
// model inputs under their submitted names. Local input generation runs it.
func (c *Canonical) Graph() *transform.Graph {
	seen := map[int]bool{}
	var nodes []int
	for _, comp := range c.Components {
		for _, i := range comp.Nodes {
			if !seen[i] {
				seen[i] = true
				nodes = append(nodes, i)
			}
		}
	}
	var ins []transform.ModelInput
	for _, comp := range c.Components {
		ins = append(ins, transform.ModelInput{Name: comp.Input, Node: comp.Root})
	}
	return c.graph(nodes, ins)
}

// graph builds a transform.Graph of the given canonical nodes (inputs before
// users), remapping indices.
func (c *Canonical) graph(nodes []int, ins []transform.ModelInput) *transform.Graph {
	idx := make(map[int]int, len(nodes))
	g := &transform.Graph{}
	for _, i := range nodes {
		n := &c.Nodes[i]
		tn := transform.Node{Op: n.Op, Params: slices.Clone(n.Params)}
		for _, j := range n.Inputs {
			tn.Inputs = append(tn.Inputs, idx[j])
		}
		idx[i] = len(g.Nodes)
		g.Nodes = append(g.Nodes, tn)
	}
	for _, in := range ins {
		g.Inputs = append(g.Inputs, transform.ModelInput{Name: in.Name, Node: idx[in.Node]})
	}
	return g
}

// DSL returns the canonical DSL of a component: one `input NAME = ...`
// statement, with lets (_n<i>) only for nodes used twice.
func (c *Canonical) DSL(comp *Component, name string) string {
	return strings.TrimSpace(transform.Print(c.ComponentGraph(comp, name)))
}

// KeyOf canonicalizes a single DSL expression (e.g. a faulty subgraph typed
// by an operator) and returns the key of its root node.
func KeyOf(expr string, s *transform.Schema, reg *transform.Registry) (Key, *Canonical, error) {
	src := "input subgraph = " + strings.TrimSpace(expr) + "\n"
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		return Key{}, nil, fmt.Errorf("subgraph: %w", err)
	}
	c, err := Canonicalize(g, s, reg, transform.Limits{})
	if err != nil {
		return Key{}, nil, fmt.Errorf("subgraph: %w", err)
	}
	return c.Components[0].Key, c, nil
}

// NodeIndex returns the index in Nodes of the node with key k.
func (c *Canonical) NodeIndex(k Key) (int, bool) {
	i, ok := c.byKey[k]
	return i, ok
}

// Cone returns the component of node i, as if it were a model input's root
// named name: any node may be memoized (a memo node of a cover), and its
// cone is what a worker computes and what its key names.
func (c *Canonical) Cone(i int, name string) Component {
	return c.component(name, i, make([]int32, len(c.Nodes)), 1, &coneScratch{})
}

// Residual returns the graph a reader runs when the columns of the nodes in
// memo are given (memoized nodes it fetched): every component's nodes
// reachable from its root without passing through a memo node, inputs
// first, with the model inputs under their submitted names. A memo node it
// reaches is a leaf there (its inputs are not needed; transform.RunGiven
// takes its column), and given maps each such node's index in Nodes to its
// index in the graph; memo nodes it does not reach (beneath another) are
// not in given; types[j] is the type of the graph's node j. The graph is
// for running, not printing: its memo nodes lack their inputs.
func (c *Canonical) Residual(memo map[int]bool) (g *transform.Graph, given map[int]int, types []transform.Type) {
	idx := map[int]int{}
	given = map[int]int{}
	g = &transform.Graph{}
	var visit func(i int)
	visit = func(i int) {
		if _, ok := idx[i]; ok {
			return
		}
		n := &c.Nodes[i]
		tn := transform.Node{Op: n.Op, Params: slices.Clone(n.Params)}
		if memo[i] {
			given[i] = len(g.Nodes)
		} else {
			for _, j := range n.Inputs {
				visit(j)
				tn.Inputs = append(tn.Inputs, idx[j])
			}
		}
		idx[i] = len(g.Nodes)
		g.Nodes = append(g.Nodes, tn)
		types = append(types, n.Type)
	}
	for _, comp := range c.Components {
		visit(comp.Root)
		g.Inputs = append(g.Inputs, transform.ModelInput{Name: comp.Input, Node: idx[comp.Root]})
	}
	return g, given, types
}

// ResidualDSL writes a component with the nodes in memo as memo("<key
// prefix>"): the ops a reader runs over the memoized nodes of a cover, for
// people (read solutions, the web UI, sigctl). It is not parsed back.
func (c *Canonical) ResidualDSL(comp *Component, memo map[int]bool) string {
	var b strings.Builder
	var write func(i int)
	write = func(i int) {
		n := &c.Nodes[i]
		if memo[i] {
			fmt.Fprintf(&b, "memo(%q)", n.Key.Short())
			return
		}
		if n.Op == "col" {
			v, _ := paramOf(n.Params, "name")
			fmt.Fprintf(&b, "col(%q)", v.Str)
			return
		}
		b.WriteString(n.Op)
		b.WriteByte('(')
		for x, j := range n.Inputs {
			if x > 0 {
				b.WriteString(", ")
			}
			write(j)
		}
		for x, p := range n.Params {
			if x > 0 || len(n.Inputs) > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.Name + "=" + p.Value.String())
		}
		b.WriteByte(')')
	}
	write(comp.Root)
	return b.String()
}
