package transform

import (
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
)

// Program is a graph compiled once to compute its model inputs over many
// records of raw events: the one way SIG computes a component over raw
// columns, in workers, sigd, readers and `sigctl run` alike, so that a
// column computed anywhere is computed the same way (package doc,
// "Computing over raw columns"). Reading the record stays with the
// caller, who alone knows where its columns are (a segment cache, ranged
// fetches, a file): Columns says which to read.
//
// A Program is immutable: one may run over several records at once.
type Program struct {
	g   *Graph // its own copy; a given node's inputs removed
	typ []Type // typ[i]: node i's type
	s   *Schema
	reg *Registry
	// outputs are the model inputs' nodes, in order: what Run returns.
	outputs []int
	// given are the nodes whose columns every Run is given, sorted.
	given []int
	// columns are event_id, then the raw columns the outputs need,
	// sorted; conformed is the Arrow schema of Conform's records.
	columns   []string
	conformed *arrow.Schema
}

// Compile checks g against s and reg (Check, which it runs on a copy:
// g itself is not changed) and compiles it. Run returns the columns of
// g's model inputs, in order.
func Compile(g *Graph, s *Schema, reg *Registry, lim Limits) (*Program, error) {
	g = g.Clone()
	types, err := Check(g, s, reg, lim)
	if err != nil {
		return nil, err
	}
	return compile(g, types, nil, s, reg)
}

// CompileDSL parses DSL text, checks it (ParseAndCheck: errors carry file,
// line and column) and compiles it.
func CompileDSL(src []byte, file string, s *Schema, reg *Registry, lim Limits) (*Program, error) {
	g, types, err := ParseAndCheck(src, file, s, reg, lim)
	if err != nil {
		return nil, err
	}
	return compile(g, types, nil, s, reg)
}

// CompileResidual compiles a residual graph (canon.Residual): what is left
// of a checked graph when the columns of some of its nodes are given
// rather than computed (memoized nodes a worker or a reader fetched).
// given are those nodes, which every Run must be given and whose inputs,
// if any, are not run; types[i] is node i's type. A residual cannot be
// checked again (its given nodes lack their inputs), so its nodes must be
// those of a graph that passed Check, as canon.Residual's are; what is
// checked here is what running needs: inputs in range and no cycle, every
// op with a kernel, every raw column in the schema with its type.
func CompileResidual(g *Graph, types []Type, given []int, s *Schema, reg *Registry) (*Program, error) {
	if len(types) != len(g.Nodes) {
		return nil, fmt.Errorf("residual graph of %d nodes with %d types", len(g.Nodes), len(types))
	}
	g = g.Clone()
	for _, i := range given {
		if i < 0 || i >= len(g.Nodes) {
			return nil, fmt.Errorf("given node %d, but the graph has %d nodes", i, len(g.Nodes))
		}
		g.Nodes[i].Inputs = nil
	}
	for i, n := range g.Nodes {
		for _, j := range n.Inputs {
			if j < 0 || j >= len(g.Nodes) {
				return nil, fmt.Errorf("node %d (%s) reads node %d, but the graph has %d nodes", i, n.Op, j, len(g.Nodes))
			}
		}
		if slices.Contains(given, i) || n.Op == "col" {
			continue
		}
		if _, ok := reg.Kernel(n.Op); !ok {
			return nil, fmt.Errorf("node %d: op %q has no kernel", i, n.Op)
		}
	}
	for _, in := range g.Inputs {
		if in.Node < 0 || in.Node >= len(g.Nodes) {
			return nil, fmt.Errorf("model input %q is node %d, but the graph has %d nodes", in.Name, in.Node, len(g.Nodes))
		}
	}
	return compile(g, slices.Clone(types), given, s, reg)
}

// compile builds the Program of g (owned by it: a copy of the caller's, or
// fresh from the parser), with the inputs of the given nodes removed.
func compile(g *Graph, types []Type, given []int, s *Schema, reg *Registry) (*Program, error) {
	if len(g.Inputs) == 0 {
		return nil, fmt.Errorf("graph has no model inputs")
	}
	p := &Program{g: g, typ: types, s: s, reg: reg, given: slices.Clone(given)}
	slices.Sort(p.given)
	p.given = slices.Compact(p.given)
	for _, in := range g.Inputs {
		p.outputs = append(p.outputs, in.Node)
	}
	order, err := TopoOrder(g)
	if err != nil {
		return nil, err
	}
	var cols []string
	for _, i := range order {
		n := &g.Nodes[i]
		if n.Op != "col" || slices.Contains(p.given, i) {
			continue
		}
		name, _ := n.Param("name")
		f, ok := s.Lookup(name.Str)
		if !ok {
			return nil, fmt.Errorf("node %d reads column %q, which is not in schema %q", i, name.Str, s.Source)
		}
		if f.Type != types[i] {
			return nil, fmt.Errorf("node %d reads column %q as %s, but the schema's type is %s", i, name.Str, types[i], f.Type)
		}
		if name.Str != ColEventID && !slices.Contains(cols, name.Str) {
			cols = append(cols, name.Str)
		}
	}
	slices.Sort(cols)
	p.columns = append([]string{ColEventID}, cols...)
	if _, ok := s.Lookup(ColEventID); !ok {
		return nil, fmt.Errorf("schema %q has no %s column", s.Source, ColEventID)
	}
	p.conformed = conformedSchema(s, p.columns)
	return p, nil
}

// Graph is the graph the program runs (a given node without inputs), for
// reading only: its nodes' indices are those of Run's given map and of
// Types.
func (p *Program) Graph() *Graph { return p.g }

// Types returns each node's type, by node index (read only).
func (p *Program) Types() []Type { return p.typ }

// Columns are the raw columns a record must carry: event_id first (every
// caller needs a block's row identity along the outputs: the memo object's
// event_id, the rows of a batch), then the raw columns the outputs need
// and no given node covers, sorted. Read only.
func (p *Program) Columns() []string { return p.columns }

// Conform returns rec's Columns as a record in the schema's types, as the
// package's Conform does (foreign encodings converted, layouts checked, no
// copy of a column that already has its type). Its errors wrap ErrColumn.
// Run takes a record Conform returned (or a slice of one) as it is, so a
// caller that needs the conformed event_id (or checks something before
// computing) conforms once.
func (p *Program) Conform(rec arrow.Record) (arrow.Record, error) {
	cols, err := conformColumns(p.s, rec, p.columns)
	if err != nil {
		return nil, err
	}
	return newRecord(p.conformed, cols, rec.NumRows()), nil
}

// Run computes the program's outputs over one record of raw events and
// returns their columns, in the order of the graph's model inputs; the
// caller releases them. rec is conformed first (Conform; a record Conform
// returned is not conformed again), so a record any Arrow producer wrote,
// holding the Columns in any encoding Conform converts, gives the same
// columns bit for bit as the plain encoding does. given[i] is the column
// of given node i, each of the record's rows and of the node's type;
// Run retains what it keeps and the caller still releases them. A
// record that does not conform is an error wrapping ErrColumn; an op that
// fails or panics (PanicError) is an error that does not.
func (p *Program) Run(rec arrow.Record, given map[int]arrow.Array) ([]arrow.Array, error) {
	return p.RunObserved(rec, given, nil)
}

// RunObserved is Run telling observe (when not nil) how long each node's
// kernel took: workers measure the cost of ops this way, for the
// insertion policy (matching/insertion). The time of making a list-view
// contiguous for the next kernel counts to the node that made it.
func (p *Program) RunObserved(rec arrow.Record, given map[int]arrow.Array, observe func(node int, d time.Duration)) ([]arrow.Array, error) {
	if len(given) != len(p.given) {
		return nil, fmt.Errorf("given the columns of %d nodes, want those of %d (nodes %v)", len(given), len(p.given), p.given)
	}
	for _, i := range p.given {
		v, ok := given[i]
		if !ok {
			return nil, fmt.Errorf("the column of node %d (%s) is not given", i, p.g.Nodes[i].Op)
		}
		// A given column is a memo object's, which its reader decoded as
		// the node's type; one of another type would reach a kernel that
		// trusts it.
		if want := p.typ[i].ArrowType(); !arrow.TypeEqual(v.DataType(), want) {
			return nil, fmt.Errorf("given column of node %d (%s) has Arrow type %s, want %s", i, p.g.Nodes[i].Op, v.DataType(), want)
		}
	}
	if rec.Schema() != p.conformed {
		c, err := p.Conform(rec)
		if err != nil {
			return nil, err
		}
		defer c.Release()
		rec = c
	}
	return run(p.g, p.reg, rec, given, observe, p.outputs)
}
