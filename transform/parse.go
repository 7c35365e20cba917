package transform

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The DSL, one statement a line (newlines inside parentheses and brackets
// are ignored), '#' starts a comment:
//
//	stmt   = ("let" | "input") NAME "=" expr
//	expr   = NAME | OP "(" [arg {"," arg}] [","] ")"
//	arg    = expr | NAME "=" lit | STRING          (a bare string only in col("..."))
//	lit    = NUMBER | STRING | "[" [NUMBER {"," NUMBER}] [","] "]"
//
// Names are bindings only: `let` and `input` names share one namespace and
// may be used before the line that defines them (statement order never
// matters), so a reference loop is reported as a cycle.

type expr struct {
	pos    Pos
	ident  string // a reference, when call is nil
	call   *callExpr
	strLit *token // a bare string argument (col("name"))
}

type callExpr struct {
	op     string
	args   []*expr
	params []Param
}

type stmt struct {
	input bool
	name  string
	pos   Pos // of the name
	kwPos Pos
	e     *expr
}

type parser struct {
	lx   lexer
	tok  token
	file string
	lim  Limits
}

func (p *parser) errf(pos Pos, format string, args ...any) *Error {
	return &Error{File: p.file, Pos: pos, Node: -1, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) wrap(err error) error {
	if e, ok := err.(*Error); ok {
		e.File = p.file
		return e
	}
	return err
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return p.wrap(err)
	}
	p.tok = t
	return nil
}

func (p *parser) expect(k tokKind, what string) (token, error) {
	t := p.tok
	if t.kind != k {
		return t, p.errf(t.pos, "expected %s, found %s", what, t.describe())
	}
	return t, p.advance()
}

// Parse parses DSL text into a graph. file names the source in errors (it
// may be empty). The graph is not yet checked against a schema: call Check.
func Parse(src []byte, file string, lim Limits) (*Graph, error) {
	lim = lim.EnsureDefaults()
	if len(src) > lim.MaxSourceBytes {
		// The position is that of the first byte past the limit.
		return nil, &Error{File: file, Pos: posOf(src, lim.MaxSourceBytes), Node: -1,
			Msg: fmt.Sprintf("source is %d bytes, more than the limit of %d", len(src), lim.MaxSourceBytes)}
	}
	p := &parser{lx: lexer{src: src, line: 1, col: 1, lim: lim}, file: file, lim: lim}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var stmts []*stmt
	for p.tok.kind != tEOF {
		if p.tok.kind == tNewline {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		s, err := p.parseStmt()
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, s)
		if len(stmts) > lim.MaxNodes+lim.MaxInputs {
			return nil, p.errf(s.kwPos, "more than %d statements", lim.MaxNodes+lim.MaxInputs)
		}
	}
	return p.build(stmts)
}

// posOf returns the line and column (in bytes, 1-based) of byte offset off.
func posOf(src []byte, off int) Pos {
	line := 1 + bytes.Count(src[:off], []byte{'\n'})
	return Pos{Line: line, Col: off - (bytes.LastIndexByte(src[:off], '\n') + 1) + 1}
}

func (p *parser) parseStmt() (*stmt, error) {
	kw := p.tok
	if kw.kind != tIdent || (kw.text != "let" && kw.text != "input") {
		return nil, p.errf(kw.pos, "expected a statement starting with `let` or `input`, found %s", kw.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	name, err := p.expect(tIdent, "a name")
	if err != nil {
		return nil, err
	}
	if IsKeyword(name.text) {
		return nil, p.errf(name.pos, "%q is a keyword and cannot be a name", name.text)
	}
	if _, err := p.expect(tEq, `"="`); err != nil {
		return nil, err
	}
	e, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tNewline && p.tok.kind != tEOF {
		return nil, p.errf(p.tok.pos, "expected end of line after the expression, found %s", p.tok.describe())
	}
	return &stmt{input: kw.text == "input", name: name.text, pos: name.pos, kwPos: kw.pos, e: e}, nil
}

func (p *parser) parseExpr(depth int) (*expr, error) {
	if depth >= p.lim.MaxDepth {
		return nil, p.errf(p.tok.pos, "expression is nested deeper than the limit of %d ops", p.lim.MaxDepth)
	}
	t := p.tok
	if t.kind != tIdent {
		return nil, p.errf(t.pos, "expected an op call or a name, found %s", t.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLParen {
		return &expr{pos: t.pos, ident: t.text}, nil
	}
	lparen := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	c := &callExpr{op: t.text}
	unclosed := func() error {
		// Newlines inside parentheses do not end a statement, so an
		// unclosed call runs into the next statement.
		return p.errf(lparen, "\"(\" of %s is not closed (found %s at %s)", c.op, p.tok.describe(), p.tok.pos)
	}
	for p.tok.kind != tRParen {
		if p.tok.kind == tIdent && IsKeyword(p.tok.text) || p.tok.kind == tEOF {
			return nil, unclosed()
		}
		if err := p.parseArg(c, depth); err != nil {
			return nil, err
		}
		if p.tok.kind == tComma {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.tok.kind == tIdent && IsKeyword(p.tok.text) || p.tok.kind == tEOF {
			return nil, unclosed()
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected \",\" or \")\" in the arguments of %s, found %s", c.op, p.tok.describe())
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return &expr{pos: t.pos, call: c}, nil
}

func (p *parser) parseArg(c *callExpr, depth int) error {
	t := p.tok
	switch t.kind {
	case tString:
		if len(c.args) > 0 || len(c.params) > 0 {
			return p.errf(t.pos, "a bare string is only allowed as the first argument of col(...); name the parameter (e.g. default=%q)", truncName(t.text))
		}
		if err := p.advance(); err != nil {
			return err
		}
		c.args = append(c.args, &expr{pos: t.pos, strLit: &t})
		return nil
	case tInt, tFloat, tLBrack:
		return p.errf(t.pos, "parameters must be named, e.g. %s(x, n=3)", c.op)
	case tIdent:
	default:
		return p.errf(t.pos, "expected an argument, found %s", t.describe())
	}
	// NAME "=" lit is a parameter; anything else starting with a name is an
	// expression. One token of lookahead past the name decides.
	save := p.lx
	if err := p.advance(); err != nil {
		return err
	}
	if p.tok.kind == tEq {
		if err := p.advance(); err != nil {
			return err
		}
		v, err := p.parseLit()
		if err != nil {
			return err
		}
		c.params = append(c.params, Param{Name: t.text, Value: v, Pos: t.pos})
		return nil
	}
	if len(c.params) > 0 {
		return p.errf(t.pos, "positional argument after a named parameter in %s(...)", c.op)
	}
	// Rewind and parse an expression.
	p.lx = save
	p.tok = t
	e, err := p.parseExpr(depth + 1)
	if err != nil {
		return err
	}
	c.args = append(c.args, e)
	return nil
}

func (p *parser) parseLit() (Value, error) {
	t := p.tok
	switch t.kind {
	case tInt:
		return IntValue(t.i), p.advance()
	case tFloat:
		return FloatValue(t.f), p.advance()
	case tString:
		return StringValue(t.text), p.advance()
	case tLBrack:
		if err := p.advance(); err != nil {
			return Value{}, err
		}
		v := Value{Kind: KindFloatList, Floats: []float64{}}
		for p.tok.kind != tRBrack {
			switch p.tok.kind {
			case tInt:
				v.Floats = append(v.Floats, float64(p.tok.i))
			case tFloat:
				v.Floats = append(v.Floats, p.tok.f)
			default:
				return Value{}, p.errf(p.tok.pos, "expected a number in the list, found %s", p.tok.describe())
			}
			if len(v.Floats) > p.lim.MaxListLen {
				return Value{}, p.errf(t.pos, "list has more than %d elements (the limit)", p.lim.MaxListLen)
			}
			if err := p.advance(); err != nil {
				return Value{}, err
			}
			if p.tok.kind == tComma {
				if err := p.advance(); err != nil {
					return Value{}, err
				}
			} else if p.tok.kind != tRBrack {
				return Value{}, p.errf(p.tok.pos, "expected \",\" or \"]\" in the list, found %s", p.tok.describe())
			}
		}
		return v, p.advance()
	}
	return Value{}, p.errf(t.pos, "expected a number, a string or a list of numbers, found %s", t.describe())
}

// build resolves names and creates nodes. Statements are built in
// dependency order (a statement after every binding it refers to, ties
// broken by source order), each expression in post-order with references as
// leaves. So the nodes of one statement are contiguous and a printed graph,
// whose statements come in node order, parses back to the same nodes.
func (p *parser) build(stmts []*stmt) (*Graph, error) {
	b := &builder{p: p, g: &Graph{}, bind: map[string]*binding{}}
	for i, s := range stmts {
		if prev, dup := b.bind[s.name]; dup {
			what := "name"
			if s.input && prev.s.input {
				what = "input"
			}
			return nil, p.errf(s.pos, "duplicate %s %q (first defined at %s)", what, s.name, prev.s.pos)
		}
		b.bind[s.name] = &binding{s: s, idx: i, node: -1}
	}
	// Dependencies, and undefined names in source order.
	deps := make([][]int, len(stmts))
	users := make([][]int, len(stmts))
	indeg := make([]int, len(stmts))
	for i, s := range stmts {
		seen := map[int]bool{}
		var err error
		walkRefs(s.e, "", func(e *expr, parent string) bool {
			bd, ok := b.bind[e.ident]
			if !ok {
				err = b.undefined(e, parent)
				return false
			}
			if !seen[bd.idx] {
				seen[bd.idx] = true
				deps[i] = append(deps[i], bd.idx)
				users[bd.idx] = append(users[bd.idx], i)
				indeg[i]++
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	// Kahn's algorithm, always taking the earliest ready statement.
	ready := &intHeap{}
	for i := range stmts {
		if indeg[i] == 0 {
			ready.push(i)
		}
	}
	var order []int
	for ready.len() > 0 {
		i := ready.pop()
		order = append(order, i)
		for _, u := range users[i] {
			if indeg[u]--; indeg[u] == 0 {
				ready.push(u)
			}
		}
	}
	if len(order) < len(stmts) {
		return nil, b.cycle(stmts, deps, indeg)
	}
	for _, i := range order {
		s := stmts[i]
		bd := b.bind[s.name]
		n, err := b.expr(s.e)
		if err != nil {
			return nil, err
		}
		bd.node = n
		// A let names the node it creates; an alias (let r = q) or an input
		// statement renames nothing.
		if !s.input && s.e.call != nil {
			b.g.Nodes[n].Name = s.name
		}
	}
	for _, s := range stmts {
		if s.input {
			b.g.Inputs = append(b.g.Inputs, ModelInput{Name: s.name, Node: b.bind[s.name].node, Pos: s.pos})
		}
	}
	return b.g, nil
}

// walkRefs calls f on every name reference in e, with the op of the call
// it is an argument of, in source order, until f returns false.
func walkRefs(e *expr, parent string, f func(e *expr, parent string) bool) bool {
	if e.call == nil {
		if e.strLit != nil {
			return true
		}
		return f(e, parent)
	}
	for _, a := range e.call.args {
		if !walkRefs(a, e.call.op, f) {
			return false
		}
	}
	return true
}

func (b *builder) undefined(e *expr, parent string) error {
	msg := fmt.Sprintf("undefined name %q", e.ident)
	if parent == "col" {
		return b.p.errf(e.pos, "%s (a column name is a string: col(%q))", msg, e.ident)
	}
	names := make([]string, 0, len(b.bind))
	for n := range b.bind {
		names = append(names, n)
	}
	sort.Strings(names)
	if sug := suggest(e.ident, names); sug != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", sug)
	} else if _, isOp := Default().Op(e.ident); isOp {
		msg += fmt.Sprintf(" (to call the op, write %s(...))", e.ident)
	}
	return b.p.errf(e.pos, "%s", msg)
}

// cycle reports one reference loop among the statements left unbuilt.
func (b *builder) cycle(stmts []*stmt, deps [][]int, indeg []int) error {
	start := 0
	for start < len(stmts) && indeg[start] == 0 {
		start++
	}
	var path []int
	onPath := map[int]int{}
	for i := start; ; {
		if k, ok := onPath[i]; ok {
			path = append(path[k:], i)
			break
		}
		onPath[i] = len(path)
		path = append(path, i)
		next := -1
		for _, d := range deps[i] {
			if indeg[d] > 0 {
				next = d
				break
			}
		}
		if next < 0 {
			break // cannot happen: every unbuilt statement waits on another
		}
		i = next
	}
	names := make([]string, len(path))
	for k, i := range path {
		names[k] = stmts[i].name
	}
	return b.p.errf(stmts[path[0]].pos, "cycle: %s", strings.Join(names, " -> "))
}

type binding struct {
	s    *stmt
	idx  int
	node int
}

type builder struct {
	p    *parser
	g    *Graph
	bind map[string]*binding
}

func (b *builder) expr(e *expr) (int, error) {
	if e.call == nil {
		if e.strLit != nil {
			return 0, b.p.errf(e.pos, "unexpected string %q", truncName(e.strLit.text))
		}
		return b.bind[e.ident].node, nil
	}
	c := e.call
	n := Node{Op: c.op, Pos: e.pos, Params: append([]Param(nil), c.params...)}
	for k, a := range c.args {
		if a.strLit != nil {
			if c.op != "col" || k != 0 {
				return 0, b.p.errf(a.pos, "a bare string is only allowed in col(...)")
			}
			// The bare string comes first, as Print writes it.
			n.Params = slices.Insert(n.Params, 0, Param{Name: "name", Value: StringValue(a.strLit.text), Pos: a.pos})
			continue
		}
		in, err := b.expr(a)
		if err != nil {
			return 0, err
		}
		n.Inputs = append(n.Inputs, in)
	}
	if len(b.g.Nodes) >= b.p.lim.MaxNodes {
		return 0, b.p.errf(e.pos, "graph has more than %d nodes (the limit)", b.p.lim.MaxNodes)
	}
	b.g.Nodes = append(b.g.Nodes, n)
	return len(b.g.Nodes) - 1, nil
}

// intHeap is a min-heap of statement indices.
type intHeap struct{ a []int }

func (h *intHeap) len() int { return len(h.a) }

func (h *intHeap) push(x int) {
	h.a = append(h.a, x)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if h.a[p] <= h.a[i] {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *intHeap) pop() int {
	x := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.a[l] < h.a[m] {
			m = l
		}
		if r < len(h.a) && h.a[r] < h.a[m] {
			m = r
		}
		if m == i {
			break
		}
		h.a[m], h.a[i] = h.a[i], h.a[m]
		i = m
	}
	return x
}

// ParseAndCheck parses DSL text and checks it against the schema, returning
// the normalized graph and its node types. Errors carry file:line:col.
func ParseAndCheck(src []byte, file string, s *Schema, reg *Registry, lim Limits) (*Graph, []Type, error) {
	g, err := Parse(src, file, lim)
	if err != nil {
		return nil, nil, err
	}
	types, err := Check(g, s, reg, lim)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.File = file
		}
		return nil, nil, err
	}
	return g, types, nil
}
