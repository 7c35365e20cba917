package reader

import (
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// MemoColumn is the name of the memoized column in a memo object (see
// warehouse/block.MemoColumn).
const MemoColumn = block.MemoColumn

// DefaultLabels are the label columns of a unit that names none.
var DefaultLabels = []string{"click", "conversion"}

// Limits bound what one work unit may ask of a reader. Zero fields take the
// defaults (EnsureDefaults).
type Limits struct {
	// MaxInputs bounds the model inputs of a unit. Default 1024
	// (transform's MaxInputs).
	MaxInputs int
	// MaxLabels bounds the label columns. Default 64.
	MaxLabels int
	// MaxBatchRows bounds batch_rows. Default 65536.
	MaxBatchRows int
	// DefaultBatchRows is used when a unit gives none. Default 4096.
	DefaultBatchRows int
	// Graph bounds each LOCAL input's canonical DSL and the graph they form
	// together (transform.Limits defaults).
	Graph transform.Limits
}

// EnsureDefaults fills zero fields.
func (l Limits) EnsureDefaults() Limits {
	if l.MaxInputs <= 0 {
		l.MaxInputs = 1024
	}
	if l.MaxLabels <= 0 {
		l.MaxLabels = 64
	}
	if l.MaxBatchRows <= 0 {
		l.MaxBatchRows = 1 << 16
	}
	if l.DefaultBatchRows <= 0 {
		l.DefaultBatchRows = 4096
	}
	l.Graph = l.Graph.EnsureDefaults()
	return l
}

// plan is a checked work unit: everything a reader needs to serve it. Most
// of it depends only on the unit's input set (its shape, built once per
// input set: plancache.go), the rest on the unit's block.
type plan struct {
	unit *readerv1.WorkUnit
	// raw is the raw block version the unit reads, from its raw_object
	// key (issue 21).
	raw    blockref.Ref
	schema *transform.Schema
	labels []string
	inputs []inputPlan
	// rawColumns are the raw columns read (event_id implied): the labels,
	// then the columns the LOCAL inputs read.
	rawColumns []string
	// local computes every LOCAL input, shared nodes once (matching's
	// canonical form); its i-th output is inputs[localIdx[i]].
	local    *transform.Program
	localIdx []int
	// nodes are the memoized nodes the LOCAL inputs read (a cover's memo
	// nodes, deduplicated, only those the residual reaches): each is read as
	// a MEMO input is, and its column is given to the run of local at
	// node nodeIdx[j].
	nodes   []inputPlan
	nodeIdx []int
	// nodeSrc[j] is the entry (x, k) of memoNodes whose memo object node
	// j is read from.
	nodeSrc [][2]int
	// memoNodes[x] are the memo nodes the unit lists for the LOCAL input
	// localIdx[x], parsed.
	memoNodes [][]memoNodePlan
	// guard is what the shared-fate guard checks (guard.go); nil: nothing.
	guard     *guardPlan
	out       *arrow.Schema
	batchRows int
	// trim: the unit holds only the block's rows whose event_time lies in
	// [events[0], events[1]) (WorkUnit.event_range, issue 29); the unit's
	// own, bound per unit, never part of its shape.
	trim   bool
	events [2]int64
	reg    *transform.Registry
	// shape is what the plan was bound from; its fields above are shared
	// with every plan of the shape and read only (bind copies those a
	// unit sets: inputs, nodes, rawColumns).
	shape *shape
}

type inputPlan struct {
	name      string
	component canon.Key // parsed once, from the unit's component_key
	typ       transform.Type
	mode      readerv1.InputMode
	memo      string
	// column is the input's column in the memo object: MemoColumn, the
	// column of an object of one component as written before packs, or
	// its component's column in a pack (issue 28, packed set), as the
	// read solution names it.
	column string
	packed bool
	state  sigv1.BlockState
	// memoBlock is the memo data's block and input version: an object of
	// one component's key's, a pack member's the unit's memo_version.
	memoBlock blockref.Memo
}

// reads returns the memo objects a unit reads: its inputs (the MEMO ones
// are read), then the memo nodes of its LOCAL inputs.
func (p *plan) reads() []inputPlan {
	if len(p.nodes) == 0 {
		return p.inputs
	}
	return append(slices.Clip(p.inputs), p.nodes...)
}

// memoNodePlan is one memo node a LOCAL input lists, checked.
type memoNodePlan struct {
	field string // inputs[i].memo_nodes[j], for errors
	read  inputPlan
}

// newPlan checks a unit against the limits and plans it, from scratch.
// Every error names the field. A Server plans through its plan cache
// (Server.plan, plancache.go), which builds the unit's shape once per
// input set.
func newPlan(u *readerv1.WorkUnit, reg *transform.Registry, lim Limits) (*plan, error) {
	return planUnit(u, lim, func() (*shape, error) { return newShape(u, reg, lim) })
}

// planUnit checks unit u and binds it to its shape, which shapeOf gives
// (built, or from a cache: it depends only on the fields shapeKey
// covers). The unit's own fields are checked around it in the order the
// unit lists them, so that an error names the same field either way.
func planUnit(u *readerv1.WorkUnit, lim Limits, shapeOf func() (*shape, error)) (*plan, error) {
	if u == nil {
		return nil, invalid("unit", "missing")
	}
	if err := checkName("unit_id", u.UnitId, true); err != nil {
		return nil, err
	}
	if err := checkName("client", u.Client, true); err != nil {
		return nil, err
	}
	if err := checkName("pipeline", u.Pipeline, true); err != nil {
		return nil, err
	}
	sh, err := shapeOf()
	if err != nil {
		return nil, err
	}
	return sh.bind(u, lim)
}

// newShape checks and plans what of unit u depends only on its input set
// (shapeKey): the schema, the labels, each input's name, component, type,
// mode and DSL, the memo nodes' keys and types, the LOCAL inputs' program
// and the batch schema. Every error names the field.
func newShape(u *readerv1.WorkUnit, reg *transform.Registry, lim Limits) (*shape, error) {
	p := &plan{reg: reg}
	// The raw source's schema: its fingerprint is in every component key, so
	// a LOCAL input computed against another schema would not match.
	if u.RawSchemaJson == "" {
		p.schema = transform.AdsSchema()
	} else {
		if len(u.RawSchemaJson) > 1<<20 {
			return nil, invalid("raw_schema_json", "%d bytes, more than 1 MiB", len(u.RawSchemaJson))
		}
		s, err := transform.ParseSchema([]byte(u.RawSchemaJson))
		if err != nil {
			return nil, invalid("raw_schema_json", "%v", err)
		}
		p.schema = s
	}
	src := u.RawSource
	if src == "" {
		src = "ads"
	}
	if src != p.schema.Source {
		return nil, invalid("raw_source", "%q, but the schema is of source %q", src, p.schema.Source)
	}

	// Batch shape: event_id, labels, inputs.
	fields := []arrow.Field{{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64}}
	names := map[string]string{transform.ColEventID: "event_id"}
	p.labels = u.LabelColumns
	if len(p.labels) == 0 {
		p.labels = DefaultLabels
	}
	if len(p.labels) > lim.MaxLabels {
		return nil, invalid("label_columns", "%d columns, more than %d", len(p.labels), lim.MaxLabels)
	}
	for i, l := range p.labels {
		field := fmt.Sprintf("label_columns[%d]", i)
		f, ok := p.schema.Lookup(l)
		if !ok {
			return nil, invalid(field, "column %q is not in schema %q", trunc(l), p.schema.Source)
		}
		if prev, dup := names[l]; dup {
			return nil, invalid(field, "column %q is already in the batch (%s)", l, prev)
		}
		names[l] = field
		fields = append(fields, arrow.Field{Name: l, Type: f.Type.ArrowType(), Nullable: true})
	}
	p.labels = slices.Clone(p.labels) // the unit's slice is the caller's
	p.rawColumns = slices.Clone(p.labels)

	if len(u.Inputs) > lim.MaxInputs {
		return nil, invalid("inputs", "%d inputs, more than %d", len(u.Inputs), lim.MaxInputs)
	}
	sh := &shape{dsls: make([]string, len(u.Inputs))}
	var local []*transform.Graph
	for i, in := range u.Inputs {
		field := fmt.Sprintf("inputs[%d]", i)
		if err := checkName(field+".name", in.Name, false); err != nil {
			return nil, err
		}
		if prev, dup := names[in.Name]; dup {
			return nil, invalid(field+".name", "%q is already a batch column (%s)", in.Name, prev)
		}
		names[in.Name] = field
		k, err := canon.ParseKey(in.ComponentKey)
		if err != nil {
			return nil, invalid(field+".component_key", "%v", err)
		}
		t, err := transform.ParseType(in.Type)
		if err != nil {
			return nil, invalid(field+".type", "%v", err)
		}
		ip := inputPlan{name: in.Name, component: k, typ: t, mode: in.Mode, column: MemoColumn}
		switch in.Mode {
		case readerv1.InputMode_INPUT_MODE_MEMO:
			// Its memo object and state are the unit's (bind).
		case readerv1.InputMode_INPUT_MODE_LOCAL:
			if len(in.CanonicalDsl) > lim.Graph.MaxSourceBytes {
				return nil, invalid(field+".canonical_dsl", "%d bytes, more than %d", len(in.CanonicalDsl), lim.Graph.MaxSourceBytes)
			}
			g, err := transform.Parse([]byte(in.CanonicalDsl), "", lim.Graph)
			if err != nil {
				return nil, invalid(field+".canonical_dsl", "%v", err)
			}
			if len(g.Inputs) != 1 || g.Inputs[0].Name != "out" {
				return nil, invalid(field+".canonical_dsl", "want exactly one model input named out, as in a read solution")
			}
			nodes, err := checkMemoNodes(field, in)
			if err != nil {
				return nil, err
			}
			local = append(local, g)
			p.localIdx = append(p.localIdx, i)
			p.memoNodes = append(p.memoNodes, nodes)
		default:
			return nil, invalid(field+".mode", "%v; want INPUT_MODE_MEMO or INPUT_MODE_LOCAL", in.Mode)
		}
		if in.Mode != readerv1.InputMode_INPUT_MODE_LOCAL && len(in.MemoNodes) > 0 {
			return nil, invalid(field+".memo_nodes", "only LOCAL inputs read memo nodes")
		}
		p.inputs = append(p.inputs, ip)
		sh.dsls[i] = in.CanonicalDsl
		fields = append(fields, arrow.Field{Name: in.Name, Type: t.ArrowType(), Nullable: true})
	}
	if len(local) > 0 {
		if err := p.planLocal(local, lim); err != nil {
			return nil, err
		}
	}
	p.out = arrow.NewSchema(fields, nil)
	sh.tmpl = p
	sh.plan()
	return sh, nil
}

// bind returns the plan of unit u, whose input set is sh's: sh's plan with
// the unit's block, raw object, batch rows, and its inputs' and memo
// nodes' memo objects and states, checked. Nothing of sh is modified:
// units of one shape are bound concurrently.
func (sh *shape) bind(u *readerv1.WorkUnit, lim Limits) (*plan, error) {
	t := sh.tmpl
	p := *t
	p.unit, p.shape = u, sh
	if err := block.ValidateName("block id", u.BlockId); err != nil {
		return nil, invalid("block_id", "%v", err)
	}
	// Any version of the block (issue 21): raw/<source>/<block>.arrow is
	// version 1, raw/<source>/<block>.v<N>.arrow version N.
	src, ref, ok := block.ParseRawKey(u.RawObject)
	if !ok || src != p.schema.Source || ref.ID() != u.BlockId || block.RawKey(src, ref) != u.RawObject {
		return nil, invalid("raw_object", "%q, want %q or a version of it (raw/<source>/<block>[.v<N>].arrow)",
			trunc(u.RawObject), block.RawKey(p.schema.Source, blockref.New(u.BlockId, 1)))
	}
	p.raw = ref
	p.batchRows = int(u.BatchRows)
	if p.batchRows == 0 {
		p.batchRows = lim.DefaultBatchRows
	}
	if p.batchRows > lim.MaxBatchRows {
		return nil, invalid("batch_rows", "%d is more than %d", u.BatchRows, lim.MaxBatchRows)
	}
	p.inputs = slices.Clone(t.inputs)
	x := 0 // the next LOCAL input's index in t.localIdx
	for i := range p.inputs {
		in, ip := u.Inputs[i], &p.inputs[i]
		field := fmt.Sprintf("inputs[%d]", i)
		ip.memo, ip.state = in.MemoObject, in.MemoState
		switch ip.mode {
		case readerv1.InputMode_INPUT_MODE_MEMO:
			var err error
			if ip.memoBlock, err = memoBlockOf(field, ip.component, in.MemoObject, in.MemoColumn, in.MemoVersion, src, p.raw); err != nil {
				return nil, err
			}
			ip.setColumn(in.MemoColumn)
			if in.MemoState == sigv1.BlockState_BLOCK_STATE_UNSPECIFIED {
				return nil, invalid(field+".memo_state", "unspecified; a MEMO input needs the state from the read solution")
			}
		case readerv1.InputMode_INPUT_MODE_LOCAL:
			for k, mn := range t.memoNodes[x] {
				if _, err := bindMemoNode(mn, in.MemoNodes[k], src, p.raw); err != nil {
					return nil, err
				}
			}
			x++
		}
	}
	p.nodes = slices.Clone(t.nodes)
	for j, src := range t.nodeSrc {
		mn := t.memoNodes[src[0]][src[1]]
		p.nodes[j], _ = bindMemoNode(mn, u.Inputs[t.localIdx[src[0]]].MemoNodes[src[1]], p.schema.Source, p.raw) // checked above
	}
	// The guard adds its columns to a copy (planGuard), and so does the
	// event range: event_time is read to select the unit's rows.
	p.rawColumns = slices.Clip(t.rawColumns)
	if r := u.EventRange; r != nil {
		// sigd refuses an empty range too (matching: "range"); a unit of
		// one would only ever be a unit of no rows.
		if r.StartMicros >= r.EndMicros {
			return nil, invalid("event_range", "[%d, %d) is empty: start_micros must be before end_micros (leave event_range unset for the whole block)",
				r.StartMicros, r.EndMicros)
		}
		p.trim, p.events = true, [2]int64{r.StartMicros, r.EndMicros}
		if !slices.Contains(p.rawColumns, transform.ColEventTime) {
			p.rawColumns = append(p.rawColumns, transform.ColEventTime)
		}
	}
	return &p, nil
}

// planLocal merges the LOCAL inputs' graphs into one and canonicalizes it, so
// that subexpressions several inputs share run once (as local input
// generation of the whole model graph would), and checks that each input's
// DSL is the component its key names: a LOCAL column then holds exactly what
// the memo object of that key holds.
func (p *plan) planLocal(graphs []*transform.Graph, lim Limits) error {
	merged := &transform.Graph{}
	for x, g := range graphs {
		base := len(merged.Nodes)
		if base+len(g.Nodes) > lim.Graph.MaxNodes {
			return invalid(fmt.Sprintf("inputs[%d].canonical_dsl", p.localIdx[x]),
				"the LOCAL inputs have more than %d nodes together", lim.Graph.MaxNodes)
		}
		for _, n := range g.Nodes {
			n.Inputs = slices.Clone(n.Inputs)
			for j := range n.Inputs {
				n.Inputs[j] += base
			}
			n.Name = "" // bindings of different inputs may collide
			merged.Nodes = append(merged.Nodes, n)
		}
		merged.Inputs = append(merged.Inputs, transform.ModelInput{
			Name: p.inputs[p.localIdx[x]].name, Node: g.Inputs[0].Node + base})
	}
	c, err := canon.Canonicalize(merged, p.schema, p.reg, lim.Graph)
	if err != nil {
		// Report the first input whose own graph fails, by name.
		for x, g := range graphs {
			if _, err1 := transform.Check(g.Clone(), p.schema, p.reg, lim.Graph); err1 != nil {
				return invalid(fmt.Sprintf("inputs[%d].canonical_dsl", p.localIdx[x]), "%v", err1)
			}
		}
		return invalid("inputs", "LOCAL inputs together: %v", err)
	}
	memo := map[int]bool{}
	reads := map[int]inputPlan{}
	src := map[int][2]int{} // the memo node entry (x, k) whose object node j is read from: the last listing it
	for x := range graphs {
		i := p.localIdx[x]
		comp := &c.Components[x]
		field := fmt.Sprintf("inputs[%d]", i)
		if comp.Key != p.inputs[i].component {
			return invalid(field+".canonical_dsl", "canonicalizes to component %s, not component_key %s",
				comp.Key.Short(), p.inputs[i].component.Short())
		}
		if comp.Type != p.inputs[i].typ {
			return invalid(field+".type", "%s, but the component's type is %s", p.inputs[i].typ, comp.Type)
		}
		// A memo node must be a node of the input's own component, of the
		// node's type: its column is then what computing the node gives.
		for k, mn := range p.memoNodes[x] {
			j, ok := c.NodeIndex(mn.read.component)
			if !ok || !slices.Contains(comp.Nodes, j) {
				return invalid(mn.field+".key", "%s is not a node of the input's component %s", mn.read.component.Short(), comp.Key.Short())
			}
			if t := c.Nodes[j].Type; t != mn.read.typ {
				return invalid(mn.field+".type", "%s, but node %s is of type %s", mn.read.typ, mn.read.component.Short(), t)
			}
			memo[j] = true
			reads[j] = mn.read
			src[j] = [2]int{x, k}
		}
	}
	if _, err := transform.Check(c.Graph(), p.schema, p.reg, lim.Graph); err != nil {
		return invalid("inputs", "LOCAL inputs together: %v", err)
	}
	// What runs is the residual above the memo nodes; its raw columns are
	// the only ones read for the LOCAL inputs.
	g, given, types := c.Residual(memo)
	for _, j := range slices.Sorted(maps.Keys(given)) {
		p.nodes = append(p.nodes, reads[j])
		p.nodeIdx = append(p.nodeIdx, given[j])
		p.nodeSrc = append(p.nodeSrc, src[j])
	}
	local, err := transform.CompileResidual(g, types, p.nodeIdx, p.schema, p.reg)
	if err != nil {
		return invalid("inputs", "LOCAL inputs together: %v", err)
	}
	for _, col := range local.Columns()[1:] { // event_id is always read
		if !slices.Contains(p.rawColumns, col) {
			p.rawColumns = append(p.rawColumns, col)
		}
	}
	p.local = local
	return nil
}

// checkMemoNodes checks the memo nodes a LOCAL input lists: their keys
// and types (that each is a node of the input's component is planLocal's
// check; their objects and states are the unit's, bindMemoNode's).
func checkMemoNodes(field string, in *readerv1.ModelInput) ([]memoNodePlan, error) {
	var out []memoNodePlan
	seen := map[canon.Key]bool{}
	for j, mn := range in.MemoNodes {
		f := fmt.Sprintf("%s.memo_nodes[%d]", field, j)
		k, err := canon.ParseKey(mn.Key)
		if err != nil {
			return nil, invalid(f+".key", "%v", err)
		}
		if seen[k] {
			return nil, invalid(f+".key", "%s is listed twice", k.Short())
		}
		seen[k] = true
		t, err := transform.ParseType(mn.Type)
		if err != nil {
			return nil, invalid(f+".type", "%v", err)
		}
		out = append(out, memoNodePlan{field: f, read: inputPlan{
			name: fmt.Sprintf("%s (memo node %s)", in.Name, k.Short()), component: k, typ: t,
			mode: readerv1.InputMode_INPUT_MODE_MEMO, column: MemoColumn}})
	}
	return out, nil
}

// bindMemoNode returns the read of memo node mn of a unit of raw block
// version raw of source, the unit listing it as m: its memo object, column
// and state, checked.
func bindMemoNode(mn memoNodePlan, m *readerv1.MemoNodeRead, source string, raw blockref.Ref) (inputPlan, error) {
	in := mn.read
	mb, err := memoBlockOf(mn.field, in.component, m.MemoObject, m.MemoColumn, m.MemoVersion, source, raw)
	if err != nil {
		return inputPlan{}, err
	}
	if m.MemoState == sigv1.BlockState_BLOCK_STATE_UNSPECIFIED {
		return inputPlan{}, invalid(mn.field+".memo_state", "unspecified; a memo node needs the state from the read solution")
	}
	in.memo, in.state, in.memoBlock = m.MemoObject, m.MemoState, mb
	in.setColumn(m.MemoColumn)
	return in, nil
}

// setColumn sets the column a memo read reads: column of a pack (issue 28),
// or MemoColumn of an object of the component alone when column is "".
func (in *inputPlan) setColumn(column string) {
	in.column, in.packed = column, column != ""
	if !in.packed {
		in.column = MemoColumn
	}
}

// memoBlockOf returns the memo block whose data a unit names for component
// k in raw block version raw of source, checking the fields (field is the
// input's or memo node's, for errors). Without a column, object is an
// object of k alone, as written before packs: memo/<k>/<block>.arrow is
// input version 1, memo/<k>/<block>.v<N>.arrow N (issue 21). With one,
// object is a pack of the unit's block and source (issue 28), column k's
// (block.MemberColumn) and version the input version of its data. Either
// way the input version is not past the raw block's version. The footer is
// checked against the result when read (block.CheckMember).
func memoBlockOf(field string, k canon.Key, object, column string, version int64, source string, raw blockref.Ref) (blockref.Memo, error) {
	if column == "" {
		got, m, ok := block.ParseMemoKey(object)
		if !ok || got != k || m.ID() != raw.ID() || m.InputVersion() > raw.Version() || version > 1 && m.InputVersion() != version {
			return blockref.Memo{}, invalid(field+".memo_object", "%q, want %q or a version of it up to the raw block's %d (memo/<component>/<block>[.v<N>].arrow), or a pack with memo_column",
				trunc(object), block.MemoKey(k, raw.Memo(1)), raw.Version())
		}
		return m, nil
	}
	if column != block.MemberColumn(k) {
		return blockref.Memo{}, invalid(field+".memo_column", "%q, want the component's key %s", trunc(column), k)
	}
	src, r, ok := block.ParsePackKey(object)
	if !ok || src != source || r.ID() != raw.ID() {
		return blockref.Memo{}, invalid(field+".memo_object", "%q, want a pack of block %q of source %q (%s%s/%s/<id>%s)",
			trunc(object), raw.ID(), source, block.PackPrefix, source, raw.ID(), block.Ext)
	}
	m := raw.Memo(version)
	if version < 0 || m.InputVersion() > raw.Version() {
		return blockref.Memo{}, invalid(field+".memo_version", "%d, want 1 to the raw block's version %d", version, raw.Version())
	}
	return m, nil
}

// checkName checks a name that ends up in logs and batch schemas: at most
// 128 bytes of printable ASCII (optional ones may be empty).
func checkName(field, s string, optional bool) error {
	if s == "" {
		if optional {
			return nil
		}
		return invalid(field, "empty")
	}
	if len(s) > 128 {
		return invalid(field, "%d bytes, more than 128", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			return invalid(field, "%q has a byte outside printable ASCII", trunc(s))
		}
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
