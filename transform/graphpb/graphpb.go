package graphpb

import (
	"fmt"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
)

// ToProto converts a graph to its message.
func ToProto(g *transform.Graph) *sigv1.Graph {
	out := &sigv1.Graph{}
	for _, n := range g.Nodes {
		pn := &sigv1.Node{Op: n.Op, Name: n.Name}
		for _, j := range n.Inputs {
			pn.Inputs = append(pn.Inputs, uint32(j))
		}
		for _, p := range n.Params {
			pn.Params = append(pn.Params, &sigv1.Param{Name: p.Name, Value: valueToProto(p.Value)})
		}
		out.Nodes = append(out.Nodes, pn)
	}
	for _, in := range g.Inputs {
		out.Inputs = append(out.Inputs, &sigv1.ModelInput{Name: in.Name, Node: uint32(in.Node)})
	}
	return out
}

func valueToProto(v transform.Value) *sigv1.Value {
	switch v.Kind {
	case transform.KindInt:
		return &sigv1.Value{Kind: &sigv1.Value_Int{Int: v.Int}}
	case transform.KindFloat:
		return &sigv1.Value{Kind: &sigv1.Value_Float{Float: v.Float}}
	case transform.KindString:
		return &sigv1.Value{Kind: &sigv1.Value_Str{Str: v.Str}}
	case transform.KindFloatList:
		return &sigv1.Value{Kind: &sigv1.Value_Floats{Floats: &sigv1.FloatList{Values: v.Floats}}}
	}
	return &sigv1.Value{}
}

// FieldError names the offending field of a graph message.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// FromProto converts a graph message, refusing messages over the limits
// before building anything. The graph it returns is checked by
// transform.Check like a parsed one: the one set of rules for graphs from
// either path (names, ops, parameters, strings, lists, depth).
func FromProto(pg *sigv1.Graph, lim transform.Limits) (*transform.Graph, error) {
	lim = lim.EnsureDefaults()
	if pg == nil {
		return nil, &FieldError{"graph", "missing"}
	}
	if len(pg.Nodes) > lim.MaxNodes {
		return nil, &FieldError{"graph.nodes", fmt.Sprintf("%d nodes, more than the limit of %d", len(pg.Nodes), lim.MaxNodes)}
	}
	if len(pg.Inputs) > lim.MaxInputs {
		return nil, &FieldError{"graph.inputs", fmt.Sprintf("%d inputs, more than the limit of %d", len(pg.Inputs), lim.MaxInputs)}
	}
	g := &transform.Graph{Nodes: make([]transform.Node, len(pg.Nodes))}
	for i, pn := range pg.Nodes {
		f := fmt.Sprintf("graph.nodes[%d]", i)
		if pn == nil {
			return nil, &FieldError{f, "missing"}
		}
		if len(pn.Inputs) > lim.MaxArgs {
			return nil, &FieldError{f + ".inputs", fmt.Sprintf("%d inputs, more than the limit of %d", len(pn.Inputs), lim.MaxArgs)}
		}
		if pn.Name != "" {
			if err := transform.CheckName(pn.Name, lim); err != nil {
				return nil, &FieldError{f + ".name", err.Error()}
			}
		}
		n := transform.Node{Op: pn.Op, Name: pn.Name}
		for _, j := range pn.Inputs {
			if int(j) >= len(pg.Nodes) {
				return nil, &FieldError{f + ".inputs", fmt.Sprintf("refers to node %d, but the graph has %d nodes", j, len(pg.Nodes))}
			}
			n.Inputs = append(n.Inputs, int(j))
		}
		for k, pp := range pn.Params {
			pf := fmt.Sprintf("%s.params[%d]", f, k)
			if pp == nil || pp.Value == nil {
				return nil, &FieldError{pf, "value not set"}
			}
			v, err := valueFromProto(pp.Value, lim)
			if err != nil {
				return nil, &FieldError{pf, err.Error()}
			}
			n.Params = append(n.Params, transform.Param{Name: pp.Name, Value: v})
		}
		g.Nodes[i] = n
	}
	for i, in := range pg.Inputs {
		if in == nil {
			return nil, &FieldError{fmt.Sprintf("graph.inputs[%d]", i), "missing"}
		}
		if int(in.Node) >= len(pg.Nodes) {
			return nil, &FieldError{fmt.Sprintf("graph.inputs[%d].node", i), fmt.Sprintf("refers to node %d, but the graph has %d nodes", in.Node, len(pg.Nodes))}
		}
		if err := transform.CheckName(in.Name, lim); err != nil {
			return nil, &FieldError{fmt.Sprintf("graph.inputs[%d].name", i), err.Error()}
		}
		g.Inputs = append(g.Inputs, transform.ModelInput{Name: in.Name, Node: int(in.Node)})
	}
	// Every field within its own limit can still add up to more than a
	// DSL source may hold; the graph is held to the source limit through
	// the smallest text that could write it. Everything else (ops,
	// parameters, duplicate names, depth) transform.Check checks, as for
	// a parsed graph.
	if n := transform.MinSourceBytes(g); n > lim.MaxSourceBytes {
		return nil, &FieldError{"graph", fmt.Sprintf("written as DSL it would be at least %d bytes, more than the limit of %d", n, lim.MaxSourceBytes)}
	}
	return g, nil
}

func valueFromProto(v *sigv1.Value, lim transform.Limits) (transform.Value, error) {
	switch k := v.Kind.(type) {
	case *sigv1.Value_Int:
		return transform.IntValue(k.Int), nil
	case *sigv1.Value_Float:
		return transform.FloatValue(k.Float), nil
	case *sigv1.Value_Str:
		if len(k.Str) > lim.MaxStringLen {
			return transform.Value{}, fmt.Errorf("string of %d bytes, more than the limit of %d", len(k.Str), lim.MaxStringLen)
		}
		return transform.StringValue(k.Str), nil
	case *sigv1.Value_Floats:
		if k.Floats == nil {
			return transform.FloatListValue(nil), nil
		}
		if len(k.Floats.Values) > lim.MaxListLen {
			return transform.Value{}, fmt.Errorf("list of %d numbers, more than the limit of %d", len(k.Floats.Values), lim.MaxListLen)
		}
		return transform.FloatListValue(append([]float64(nil), k.Floats.Values...)), nil
	}
	return transform.Value{}, fmt.Errorf("value not set")
}
