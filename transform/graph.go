package transform

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Pos is a position in DSL text: 1-based line and column (in bytes). The
// zero Pos means "not from text" (a graph built in code or received over gRPC).
type Pos struct{ Line, Col int }

func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// ValueKind is the kind of a parameter value.
type ValueKind uint8

// Parameter value kinds.
const (
	KindInvalid ValueKind = iota
	KindInt
	KindFloat
	KindString
	KindFloatList
	// KindScalar is only used in ParamSpec: the value's kind follows the
	// op's input type (fill_missing's default).
	KindScalar
)

func (k ValueKind) String() string {
	switch k {
	case KindInt:
		return "integer"
	case KindFloat:
		return "number"
	case KindString:
		return "string"
	case KindFloatList:
		return "list of numbers"
	case KindScalar:
		return "value of the input's type"
	}
	return "invalid"
}

// article returns the kind's name with its indefinite article.
func (k ValueKind) article() string {
	if k == KindInt || k == KindInvalid {
		return "an " + k.String()
	}
	return "a " + k.String()
}

// Value is a parameter value.
type Value struct {
	Kind   ValueKind
	Int    int64
	Float  float64
	Str    string
	Floats []float64
}

// Int returns an integer Value.
func IntValue(v int64) Value { return Value{Kind: KindInt, Int: v} }

// FloatValue returns a number Value.
func FloatValue(v float64) Value { return Value{Kind: KindFloat, Float: v} }

// StringValue returns a string Value.
func StringValue(v string) Value { return Value{Kind: KindString, Str: v} }

// FloatListValue returns a list-of-numbers Value.
func FloatListValue(v []float64) Value { return Value{Kind: KindFloatList, Floats: v} }

// Equal reports whether two values are identical. Floats compare by value,
// with -0 equal to 0 (they are normalized before they reach a key).
func (v Value) Equal(w Value) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case KindInt:
		return v.Int == w.Int
	case KindFloat:
		return v.Float == w.Float || (math.IsNaN(v.Float) && math.IsNaN(w.Float))
	case KindString:
		return v.Str == w.Str
	case KindFloatList:
		return slices.Equal(v.Floats, w.Floats)
	}
	return true
}

// String renders the value as a DSL literal.
func (v Value) String() string {
	switch v.Kind {
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindFloat:
		return formatFloat(v.Float)
	case KindString:
		return strconv.Quote(v.Str)
	case KindFloatList:
		parts := make([]string, len(v.Floats))
		for i, f := range v.Floats {
			parts[i] = formatFloat(f)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "<invalid>"
}

// formatFloat prints the shortest representation that parses back to the
// same float64; integral values keep a ".0" only when they would otherwise
// read as integers where the distinction matters, which it never does for
// parameters (kinds are fixed per parameter), so 1 prints as "1".
func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Param is one named parameter of a node.
type Param struct {
	Name  string
	Value Value
	Pos   Pos
}

// Node is one op application. Inputs are indices into Graph.Nodes.
type Node struct {
	Op     string
	Inputs []int
	Params []Param
	// Name is the let binding that named this node in the DSL, if any. It is
	// only a label: it never changes a component's identity.
	Name string
	Pos  Pos
}

// Param returns the value of parameter name.
func (n *Node) Param(name string) (Value, bool) {
	for _, p := range n.Params {
		if p.Name == name {
			return p.Value, true
		}
	}
	return Value{}, false
}

// ModelInput names the node whose output a model consumes.
type ModelInput struct {
	Name string
	Node int
	Pos  Pos
}

// Graph is a transformation graph: a DAG of ops over raw columns, with named
// model inputs (paper IV.A: "each input to the model consumes the output of
// one connected component").
type Graph struct {
	Nodes  []Node
	Inputs []ModelInput
}

// Input returns the model input called name.
func (g *Graph) Input(name string) (ModelInput, bool) {
	for _, in := range g.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return ModelInput{}, false
}

// Equal reports whether two graphs have the same nodes (op, inputs and
// binding names in order, parameters as a multiset) and the same model
// inputs (as a set). Positions are ignored.
func (g *Graph) Equal(h *Graph) bool {
	if len(g.Nodes) != len(h.Nodes) || len(g.Inputs) != len(h.Inputs) {
		return false
	}
	for i := range g.Nodes {
		a, b := &g.Nodes[i], &h.Nodes[i]
		if a.Op != b.Op || a.Name != b.Name || !slices.Equal(a.Inputs, b.Inputs) || !sameParams(a.Params, b.Params) {
			return false
		}
	}
	m := map[string]int{}
	for _, in := range g.Inputs {
		m[in.Name] = in.Node
	}
	for _, in := range h.Inputs {
		if n, ok := m[in.Name]; !ok || n != in.Node {
			return false
		}
	}
	return true
}

// sameParams reports whether a and b hold the same (name, value) pairs, in
// any order. An unchecked graph may repeat a name, so each pair of b is
// matched at most once.
func sameParams(a, b []Param) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
	for _, p := range a {
		found := false
		for j, q := range b {
			if !used[j] && p.Name == q.Name && p.Value.Equal(q.Value) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Clone returns a deep copy.
func (g *Graph) Clone() *Graph {
	c := &Graph{Nodes: make([]Node, len(g.Nodes)), Inputs: slices.Clone(g.Inputs)}
	for i, n := range g.Nodes {
		n.Inputs = slices.Clone(n.Inputs)
		n.Params = slices.Clone(n.Params)
		for j := range n.Params {
			n.Params[j].Value.Floats = slices.Clone(n.Params[j].Value.Floats)
		}
		c.Nodes[i] = n
	}
	return c
}

// Error is an error in a graph or in DSL text. When the graph came from text
// it carries the line and column; otherwise it names the node.
type Error struct {
	File string
	Pos  Pos
	Node int // -1 when not about a node
	Op   string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	} else if e.Node >= 0 {
		fmt.Fprintf(&b, "node %d", e.Node)
		if e.Op != "" {
			fmt.Fprintf(&b, " (%s)", e.Op)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func errAt(pos Pos, node int, op string, format string, args ...any) *Error {
	return &Error{Pos: pos, Node: node, Op: op, Msg: fmt.Sprintf(format, args...)}
}
