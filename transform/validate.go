package transform

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Limits bound the size of a graph. Every graph that reaches SIG, from DSL
// text or over gRPC, is checked against them before anything is stored.
type Limits struct {
	MaxSourceBytes int // DSL text size
	MaxNodes       int // nodes in a graph
	MaxDepth       int // longest path from a model input to a raw column
	MaxInputs      int // model inputs in a graph
	MaxArgs        int // inputs of one node
	MaxListLen     int // elements of a list parameter
	MaxStringLen   int // bytes of a string literal
	MaxNameLen     int // bytes of a name (input, let, column)
}

// DefaultLimits are the documented limits (README, "Limits").
func DefaultLimits() Limits {
	return Limits{
		MaxSourceBytes: 1 << 20,
		MaxNodes:       10000,
		MaxDepth:       256,
		MaxInputs:      1024,
		MaxArgs:        64,
		MaxListLen:     1024,
		MaxStringLen:   4096,
		MaxNameLen:     128,
	}
}

// EnsureDefaults fills zero fields with the defaults.
func (l Limits) EnsureDefaults() Limits {
	d := DefaultLimits()
	if l.MaxSourceBytes <= 0 {
		l.MaxSourceBytes = d.MaxSourceBytes
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = d.MaxNodes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxInputs <= 0 {
		l.MaxInputs = d.MaxInputs
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = d.MaxArgs
	}
	if l.MaxListLen <= 0 {
		l.MaxListLen = d.MaxListLen
	}
	if l.MaxStringLen <= 0 {
		l.MaxStringLen = d.MaxStringLen
	}
	if l.MaxNameLen <= 0 {
		l.MaxNameLen = d.MaxNameLen
	}
	return l
}

// IsIdent reports whether s is a valid DSL identifier: an ASCII letter or
// '_' followed by ASCII letters, digits or '_'. The keywords `let` and
// `input` are identifiers but cannot be used as names (see IsKeyword).
func IsIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// IsKeyword reports whether s is a DSL keyword (`let`, `input`), which
// cannot name a binding or a model input.
func IsKeyword(s string) bool { return s == "let" || s == "input" }

// Check validates g against the schema and the registry, and normalizes it
// in place: parameter defaults are made explicit, numbers are given their
// parameter's kind (an integer literal for a number parameter becomes a
// float, -0 becomes 0), and parameters are sorted by name. It returns the
// output type of every node.
//
// Every node is checked, including dead ones (nodes no model input depends
// on): a graph with a mistake in an unused let is rejected, not silently
// accepted, and a graph built in code may not hide a cycle among dead nodes.
//
// Errors name the problem and, for graphs parsed from text, its line and
// column.
func Check(g *Graph, s *Schema, reg *Registry, lim Limits) ([]Type, error) {
	lim = lim.EnsureDefaults()
	if len(g.Nodes) > lim.MaxNodes {
		return nil, errAt(Pos{}, -1, "", "graph has %d nodes, more than the limit of %d", len(g.Nodes), lim.MaxNodes)
	}
	if len(g.Inputs) == 0 {
		return nil, errAt(Pos{}, -1, "", "graph has no model inputs (add a line `input NAME = ...`)")
	}
	if len(g.Inputs) > lim.MaxInputs {
		return nil, errAt(g.Inputs[lim.MaxInputs].Pos, -1, "", "graph has %d model inputs, more than the limit of %d", len(g.Inputs), lim.MaxInputs)
	}
	seen := map[string]Pos{}
	for _, in := range g.Inputs {
		if !validName(in.Name, lim) {
			return nil, errAt(in.Pos, -1, "", "invalid input name %q (%s)", truncName(in.Name), nameRule(lim))
		}
		if p, dup := seen[in.Name]; dup {
			return nil, errAt(in.Pos, -1, "", "duplicate input %q%s", in.Name, firstDefined(p))
		}
		seen[in.Name] = in.Pos
		if in.Node < 0 || in.Node >= len(g.Nodes) {
			return nil, errAt(in.Pos, -1, "", "input %q refers to node %d, but the graph has %d nodes", in.Name, in.Node, len(g.Nodes))
		}
	}
	// A node's name is a let binding's: the rules the DSL's names follow
	// hold for graphs built in code or received as messages too, so that
	// every graph Check accepts is one the DSL can write (and is printed
	// and stored as such), whatever path it came by.
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Name == "" {
			continue
		}
		if !validName(n.Name, lim) {
			return nil, errAt(n.Pos, i, n.Op, "invalid node name %q (%s)", truncName(n.Name), nameRule(lim))
		}
		if p, dup := seen[n.Name]; dup {
			return nil, errAt(n.Pos, i, n.Op, "duplicate name %q%s", n.Name, firstDefined(p))
		}
		seen[n.Name] = n.Pos
	}
	// Report the node error that comes first in the text (nodes are created
	// in post-order, so the first failing node is not always the leftmost).
	var first *Error
	for i := range g.Nodes {
		err := checkNode(g, i, s, reg, lim)
		if err == nil {
			continue
		}
		e, ok := err.(*Error)
		if !ok {
			return nil, err
		}
		if first == nil || (e.Pos.IsValid() && first.Pos.IsValid() && posBefore(e.Pos, first.Pos)) {
			first = e
		}
		if !e.Pos.IsValid() {
			break // graphs without positions: the first node in order
		}
	}
	if first != nil {
		return nil, first
	}
	order, err := topoAll(g)
	if err != nil {
		return nil, err
	}
	depth := make([]int, len(g.Nodes))
	types := make([]Type, len(g.Nodes))
	for _, i := range order {
		n := &g.Nodes[i]
		for _, j := range n.Inputs {
			if depth[j]+1 > depth[i] {
				depth[i] = depth[j] + 1
			}
		}
		if depth[i] >= lim.MaxDepth {
			return nil, errAt(n.Pos, i, n.Op, "graph is deeper than the limit of %d ops", lim.MaxDepth)
		}
		spec, _ := reg.Op(n.Op)
		if n.Op == "col" {
			v, _ := n.Param("name")
			f, _ := s.Lookup(v.Str)
			types[i] = f.Type
			continue
		}
		in := make([]Type, len(n.Inputs))
		for k, j := range n.Inputs {
			in[k] = types[j]
		}
		if n.Op == "fill_missing" {
			if err := coerceDefault(n, i, in[0]); err != nil {
				return nil, err
			}
		}
		t, err := spec.Infer(in, n)
		if err != nil {
			return nil, errAt(n.Pos, i, n.Op, "%v", err)
		}
		types[i] = t
	}
	return types, nil
}

// validName reports whether s can name a model input or a let binding:
// an identifier, not a keyword, at most MaxNameLen bytes.
func validName(s string, lim Limits) bool {
	return len(s) <= lim.MaxNameLen && IsIdent(s) && !IsKeyword(s)
}

// CheckName returns an error if s cannot name a model input or a node (a
// let binding) under lim: the rule Check applies, for converters that want
// to name the offending field before building a graph.
func CheckName(s string, lim Limits) error {
	lim = lim.EnsureDefaults()
	if !validName(s, lim) {
		return fmt.Errorf("invalid name %q (%s)", truncName(s), nameRule(lim))
	}
	return nil
}

// firstDefined says where a duplicated name was first defined, when the
// graph has positions.
func firstDefined(p Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf(" (first defined at %s)", p)
}

func nameRule(lim Limits) string {
	return fmt.Sprintf("want a letter or _ followed by letters, digits or _, at most %d bytes", lim.MaxNameLen)
}

func posBefore(a, b Pos) bool { return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col) }

func truncName(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func checkNode(g *Graph, i int, s *Schema, reg *Registry, lim Limits) error {
	n := &g.Nodes[i]
	spec, ok := reg.Op(n.Op)
	if !ok {
		msg := fmt.Sprintf("unknown op %q", truncName(n.Op))
		if sug := suggest(n.Op, reg.Names()); sug != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", sug)
		}
		return errAt(n.Pos, i, "", "%s", msg)
	}
	if len(n.Inputs) < spec.MinArgs || (spec.MaxArgs >= 0 && len(n.Inputs) > spec.MaxArgs) || len(n.Inputs) > lim.MaxArgs {
		return errAt(n.Pos, i, n.Op, "%s takes %s, got %d", n.Op, arity(spec, lim), len(n.Inputs))
	}
	for _, j := range n.Inputs {
		if j < 0 || j >= len(g.Nodes) {
			return errAt(n.Pos, i, n.Op, "input refers to node %d, but the graph has %d nodes", j, len(g.Nodes))
		}
	}
	// Parameters: known, unique, of the right kind and range; defaults filled.
	have := map[string]bool{}
	for k := range n.Params {
		p := &n.Params[k]
		ps, ok := spec.Param(p.Name)
		if !ok {
			return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "%s has no parameter %q%s", n.Op, truncName(p.Name), paramList(spec))
		}
		if have[p.Name] {
			return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "%s: parameter %s given twice", n.Op, p.Name)
		}
		have[p.Name] = true
		if err := checkParam(ps, &p.Value, lim); err != nil {
			return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "%s: parameter %s %v", n.Op, p.Name, err)
		}
	}
	for _, ps := range spec.Params {
		if have[ps.Name] {
			continue
		}
		if ps.Required {
			return errAt(n.Pos, i, n.Op, "%s: missing required parameter %s (%s)", n.Op, ps.Name, ps.Kind)
		}
		n.Params = append(n.Params, Param{Name: ps.Name, Value: ps.Default})
	}
	sortParams(n.Params)
	if n.Op == "col" {
		v, _ := n.Param("name")
		if _, ok := s.Lookup(v.Str); !ok {
			msg := fmt.Sprintf("col: unknown column %q in source %q", truncName(v.Str), s.Source)
			names := make([]string, len(s.Fields))
			for k, f := range s.Fields {
				names[k] = f.Name
			}
			if sug := suggest(v.Str, names); sug != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", sug)
			}
			return errAt(n.Pos, i, n.Op, "%s", msg)
		}
	}
	return nil
}

func firstPos(a, b Pos) Pos {
	if a.IsValid() {
		return a
	}
	return b
}

func arity(spec *OpSpec, lim Limits) string {
	switch {
	case spec.MaxArgs == 0:
		return "no input expressions (only parameters)"
	case spec.MaxArgs == spec.MinArgs && spec.MinArgs == 1:
		return "1 argument"
	case spec.MaxArgs == spec.MinArgs:
		return fmt.Sprintf("%d arguments", spec.MinArgs)
	case spec.MaxArgs < 0:
		return fmt.Sprintf("%d to %d arguments", spec.MinArgs, lim.MaxArgs)
	}
	return fmt.Sprintf("%d to %d arguments", spec.MinArgs, spec.MaxArgs)
}

func paramList(spec *OpSpec) string {
	if len(spec.Params) == 0 {
		return " (it takes no parameters)"
	}
	names := make([]string, len(spec.Params))
	for i, p := range spec.Params {
		names[i] = p.Name
	}
	return " (parameters: " + strings.Join(names, ", ") + ")"
}

func sortParams(ps []Param) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Name < ps[j-1].Name; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// checkParam converts v to the spec's kind where that loses nothing and
// checks its range.
func checkParam(ps *ParamSpec, v *Value, lim Limits) error {
	switch ps.Kind {
	case KindInt:
		switch v.Kind {
		case KindInt:
		case KindFloat:
			if v.Float != math.Trunc(v.Float) || math.Abs(v.Float) > 1<<53 {
				return fmt.Errorf("must be an integer, got %s", formatFloat(v.Float))
			}
			*v = IntValue(int64(v.Float))
		default:
			return fmt.Errorf("must be an integer, got %s", v.Kind.article())
		}
		if float64(v.Int) < ps.Min || float64(v.Int) > ps.Max {
			return fmt.Errorf("= %d is out of range [%s, %s]", v.Int, fmtBound(ps.Min), fmtBound(ps.Max))
		}
	case KindFloat:
		switch v.Kind {
		case KindFloat:
		case KindInt:
			*v = FloatValue(float64(v.Int))
		default:
			return fmt.Errorf("must be a number, got %s", v.Kind.article())
		}
		if v.Float == 0 {
			v.Float = 0 // -0 -> 0
		}
		if !isFinite(v.Float) {
			return fmt.Errorf("must be finite, got %s", formatFloat(v.Float))
		}
		if v.Float < ps.Min || v.Float > ps.Max {
			return fmt.Errorf("= %s is out of range [%s, %s]", formatFloat(v.Float), fmtBound(ps.Min), fmtBound(ps.Max))
		}
	case KindString:
		if v.Kind != KindString {
			return fmt.Errorf("must be a string, got %s", v.Kind.article())
		}
		if err := checkString(v.Str, lim); err != nil {
			return err
		}
	case KindFloatList:
		if v.Kind != KindFloatList {
			return fmt.Errorf("must be a list of numbers like [0.5, 1, 2], got %s", v.Kind.article())
		}
		max := ps.MaxLen
		if max == 0 || max > lim.MaxListLen {
			max = lim.MaxListLen
		}
		if len(v.Floats) == 0 {
			return fmt.Errorf("must not be empty")
		}
		if len(v.Floats) > max {
			return fmt.Errorf("has %d elements, more than the limit of %d", len(v.Floats), max)
		}
		for k, f := range v.Floats {
			if f == 0 {
				v.Floats[k] = 0
			}
			if !isFinite(f) {
				return fmt.Errorf("element %d must be finite, got %s", k+1, formatFloat(f))
			}
			if f < ps.Min || f > ps.Max {
				return fmt.Errorf("element %d = %s is out of range [%s, %s]", k+1, formatFloat(f), fmtBound(ps.Min), fmtBound(ps.Max))
			}
		}
	case KindScalar:
		switch v.Kind {
		case KindInt:
		case KindFloat:
			if v.Float == 0 {
				v.Float = 0
			}
			if !isFinite(v.Float) {
				return fmt.Errorf("must be finite, got %s", formatFloat(v.Float))
			}
		case KindString:
			if err := checkString(v.Str, lim); err != nil {
				return err
			}
		default:
			return fmt.Errorf("must be a string or a number, got %s", v.Kind.article())
		}
	}
	if ps.Check != nil {
		if err := ps.Check(*v); err != nil {
			return err
		}
	}
	return nil
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// checkString bounds a string parameter. Strings must be valid UTF-8: the
// DSL cannot write anything else, so a graph built in code with invalid
// bytes could not be printed and parsed back.
func checkString(s string, lim Limits) error {
	if len(s) > lim.MaxStringLen {
		return fmt.Errorf("is %d bytes, more than the limit of %d", len(s), lim.MaxStringLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	return nil
}

// coerceDefault gives fill_missing's default the kind of its input type.
func coerceDefault(n *Node, i int, t Type) error {
	for k := range n.Params {
		p := &n.Params[k]
		if p.Name != "default" {
			continue
		}
		v := &p.Value
		switch t {
		case String:
			if v.Kind != KindString {
				return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "fill_missing: default must be a string for string input, got %s", v)
			}
		case Int64:
			if v.Kind == KindFloat {
				if v.Float != math.Trunc(v.Float) || math.Abs(v.Float) > 1<<53 {
					return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "fill_missing: default must be an integer for int64 input, got %s", v)
				}
				*v = IntValue(int64(v.Float))
			} else if v.Kind != KindInt {
				return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "fill_missing: default must be an integer for int64 input, got %s", v)
			}
		case Float64:
			if v.Kind == KindInt {
				*v = FloatValue(float64(v.Int))
			} else if v.Kind != KindFloat {
				return errAt(firstPos(p.Pos, n.Pos), i, n.Op, "fill_missing: default must be a number for float64 input, got %s", v)
			}
		}
	}
	return nil
}

func fmtBound(f float64) string {
	switch {
	case f <= -math.MaxFloat64:
		return "-inf"
	case f >= math.MaxFloat64:
		return "inf"
	case f == math.Trunc(f) && math.Abs(f) < 1e19:
		return fmt.Sprintf("%.0f", f)
	}
	return formatFloat(f)
}

// TopoOrder returns the nodes reachable from the model inputs, inputs
// before users, or an error naming a cycle. The order is deterministic: a
// depth-first post-order from the model inputs in their order, visiting a
// node's inputs left to right.
func TopoOrder(g *Graph) ([]int, error) {
	roots := make([]int, len(g.Inputs))
	for k, in := range g.Inputs {
		roots[k] = in.Node
	}
	return topo(g, roots)
}

// topoAll is TopoOrder extended to every node: the nodes reachable from the
// model inputs first (in TopoOrder's order), then the dead ones.
func topoAll(g *Graph) ([]int, error) {
	roots := make([]int, 0, len(g.Inputs)+len(g.Nodes))
	for _, in := range g.Inputs {
		roots = append(roots, in.Node)
	}
	for i := range g.Nodes {
		roots = append(roots, i)
	}
	return topo(g, roots)
}

func topo(g *Graph, roots []int) ([]int, error) {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.Nodes))
	order := make([]int, 0, len(g.Nodes))
	var stack []topoFrame
	for _, root := range roots {
		if color[root] != white {
			continue
		}
		stack = append(stack[:0], topoFrame{root, 0})
		color[root] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			n := &g.Nodes[f.node]
			if f.next < len(n.Inputs) {
				j := n.Inputs[f.next]
				f.next++
				switch color[j] {
				case white:
					color[j] = grey
					stack = append(stack, topoFrame{j, 0})
				case grey:
					return nil, cycleError(g, stack, j)
				}
				continue
			}
			color[f.node] = black
			order = append(order, f.node)
			stack = stack[:len(stack)-1]
		}
	}
	return order, nil
}

type topoFrame struct{ node, next int }

func cycleError(g *Graph, stack []topoFrame, j int) error {
	var path []string
	start := 0
	for k, f := range stack {
		if f.node == j {
			start = k
		}
	}
	for _, f := range stack[start:] {
		path = append(path, nodeLabel(g, f.node))
	}
	path = append(path, nodeLabel(g, j))
	n := &g.Nodes[j]
	return errAt(n.Pos, j, n.Op, "cycle: %s", strings.Join(path, " -> "))
}

func nodeLabel(g *Graph, i int) string {
	if g.Nodes[i].Name != "" {
		return g.Nodes[i].Name
	}
	return fmt.Sprintf("node %d (%s)", i, g.Nodes[i].Op)
}

// suggest returns the candidate closest to s by edit distance, if close.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	if len(s) > 64 {
		return ""
	}
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
