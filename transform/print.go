package transform

import (
	"fmt"
	"strconv"
	"strings"
)

// Print renders a graph as DSL text. Nodes named by a let, nodes that are a
// model input's output and nodes used more than once get a statement of
// their own; everything else is written inline. Statements come in node
// order, so for a graph produced by Parse, Parse(Print(g)) equals g.
// Unnamed shared nodes of graphs built in code are given names "_n<index>".
func Print(g *Graph) string {
	users := make([]int, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, j := range n.Inputs {
			users[j]++
		}
	}
	inputsOf := make([][]string, len(g.Nodes))
	for _, in := range g.Inputs {
		inputsOf[in.Node] = append(inputsOf[in.Node], in.Name)
	}
	taken := map[string]bool{}
	for _, in := range g.Inputs {
		taken[in.Name] = true
	}
	name := make([]string, len(g.Nodes)) // how other expressions refer to a node
	isLet := make([]bool, len(g.Nodes))
	for i, n := range g.Nodes {
		if n.Name != "" && IsIdent(n.Name) && !IsKeyword(n.Name) && !taken[n.Name] {
			name[i], isLet[i] = n.Name, true
			taken[n.Name] = true
		}
	}
	for i := range g.Nodes {
		switch {
		case name[i] != "":
		case len(inputsOf[i]) > 0:
			name[i] = inputsOf[i][0]
		case users[i] > 1:
			nm := fmt.Sprintf("_n%d", i)
			for taken[nm] {
				nm += "_"
			}
			taken[nm] = true
			name[i], isLet[i] = nm, true
		}
	}
	var b strings.Builder
	var render func(i int, top bool)
	render = func(i int, top bool) {
		if !top && name[i] != "" {
			b.WriteString(name[i])
			return
		}
		n := &g.Nodes[i]
		b.WriteString(n.Op)
		b.WriteByte('(')
		first := true
		sep := func() {
			if !first {
				b.WriteString(", ")
			}
			first = false
		}
		// col's column name is written as a bare string, first; any other
		// parameter (only in unchecked graphs) is written named.
		bare := -1
		if n.Op == "col" {
			for k, p := range n.Params {
				if p.Name == "name" && p.Value.Kind == KindString {
					bare = k
					sep()
					b.WriteString(strconv.Quote(p.Value.Str))
					break
				}
			}
		}
		for _, j := range n.Inputs {
			sep()
			render(j, false)
		}
		for k, p := range n.Params {
			if k == bare {
				continue
			}
			sep()
			b.WriteString(p.Name)
			b.WriteByte('=')
			b.WriteString(literal(p.Value))
		}
		b.WriteByte(')')
	}
	for i := range g.Nodes {
		if name[i] == "" {
			continue
		}
		rest := inputsOf[i]
		if isLet[i] {
			b.WriteString("let " + name[i] + " = ")
		} else {
			b.WriteString("input " + name[i] + " = ")
			rest = rest[1:]
		}
		render(i, true)
		b.WriteByte('\n')
		for _, in := range rest {
			b.WriteString("input " + in + " = " + name[i] + "\n")
		}
	}
	return b.String()
}

// literal renders a parameter value so that it parses back to the same kind:
// numbers always carry a decimal point or exponent.
func literal(v Value) string {
	switch v.Kind {
	case KindFloat:
		return floatLit(v.Float)
	case KindFloatList:
		parts := make([]string, len(v.Floats))
		for i, f := range v.Floats {
			parts[i] = floatLit(f)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return v.String()
}

func floatLit(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // n: NaN, Inf never reach here
		s += ".0"
	}
	return s
}

// MinSourceBytes is a lower bound of the size of any DSL text that parses
// to g as it stands (before Check makes defaults explicit): every node is
// one call, its op and parentheses, with a comma between arguments; every
// parameter its name, '=' and value (col's column name a bare string);
// every named node "let NAME="; every model input "input NAME=". Values
// count their fewest bytes: an integer its digits, any other number one,
// a string its bytes and quotes, a list its brackets, commas and one byte
// an element. A graph that arrives as a message is held to the DSL's
// source limit with it (transform/graphpb): no graph reaches SIG larger
// than a source within MaxSourceBytes could write it.
func MinSourceBytes(g *Graph) int {
	n := 0
	for i := range g.Nodes {
		nd := &g.Nodes[i]
		n += len(nd.Op) + 2 // op(...)
		if args := len(nd.Inputs) + len(nd.Params); args > 1 {
			n += args - 1
		}
		if nd.Name != "" {
			n += len("let ") + len(nd.Name) + len("=")
		}
		for _, p := range nd.Params {
			if !(nd.Op == "col" && p.Name == "name") {
				n += len(p.Name) + len("=")
			}
			n += minLiteral(p.Value)
		}
	}
	for _, in := range g.Inputs {
		n += len("input ") + len(in.Name) + len("=")
	}
	return n
}

// minLiteral is the fewest bytes the DSL writes v in.
func minLiteral(v Value) int {
	switch v.Kind {
	case KindInt:
		return len(strconv.FormatInt(v.Int, 10))
	case KindString:
		return len(v.Str) + 2
	case KindFloatList:
		if len(v.Floats) == 0 {
			return 2
		}
		return 2 + 2*len(v.Floats) - 1
	}
	return 1
}
