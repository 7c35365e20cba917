package ps

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	psv1 "github.com/sigdata/sig/proto/ps/v1"
)

// Mode is how a client packs its RPCs.
type Mode int

const (
	// Coalesced sends one Lookup and one Apply per server per step, the
	// rows and gradients of every table and every TPU core in one packet
	// (paper V.B, "fetch and update coalescing").
	Coalesced Mode = iota
	// Uncoalesced is the baseline: one Lookup and one Apply per (TPU core,
	// table) to every server, cores × tables RPC pairs per server per step.
	Uncoalesced
)

func (m Mode) String() string {
	if m == Uncoalesced {
		return "uncoalesced"
	}
	return "coalesced"
}

// ErrInconsistent is returned when the servers are not all at the client's
// step (one was restored from an older checkpoint): Restore them to a common
// checkpoint first.
var ErrInconsistent = errors.New("ps: servers disagree on the step")

// ClientConfig configures a Client.
type ClientConfig struct {
	Tables   []Table
	Stacking bool
	Mode     Mode
	// Cores is the number of TPU cores whose lookups one step carries.
	Cores int
}

// Client is what a TPU host worker uses to read and update the embeddings
// held by the parameter servers. It is not safe for concurrent steps: one
// Lookup, then one Apply, per step.
type Client struct {
	cfg     ClientConfig
	layout  *Layout
	servers []psv1.ParameterServerClient
	step    int64 // -1 when the servers disagree
	rpcs    atomic.Int64
}

// NewClient configures every server (conns[i] is shard i of len(conns))
// with the tables. A server restored from a checkpoint keeps its state; if
// the servers do not all report the same step, Lookup and Apply fail with
// ErrInconsistent until Restore.
func NewClient(ctx context.Context, conns []grpc.ClientConnInterface, cfg ClientConfig) (*Client, error) {
	if cfg.Cores < 1 {
		return nil, fmt.Errorf("%w: cores must be >= 1", ErrInvalid)
	}
	l, err := NewLayout(cfg.Tables, cfg.Stacking, len(conns))
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, layout: l}
	for _, cc := range conns {
		c.servers = append(c.servers, psv1.NewParameterServerClient(cc))
	}
	steps := make([]int64, len(conns))
	err = c.each(func(i int, s psv1.ParameterServerClient) error {
		r, err := s.Configure(ctx, &psv1.ConfigureRequest{Tables: tablesToProto(cfg.Tables), Stacking: cfg.Stacking, Shard: int32(i), Shards: int32(len(conns))}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: configuring shard %d: %w", i, err)
		}
		steps[i] = r.GetStep()
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.step = steps[0]
	for _, s := range steps {
		if s != c.step {
			c.step = -1
		}
	}
	return c, nil
}

// Layout returns the tables' layout over the servers.
func (c *Client) Layout() *Layout { return c.layout }

// Step returns the last step every server applied, or -1 if they disagree.
func (c *Client) Step() int64 { return c.step }

// RPCs returns the number of RPCs the client has sent.
func (c *Client) RPCs() int64 { return c.rpcs.Load() }

// each runs f for every server concurrently and returns the first error.
func (c *Client) each(f func(i int, s psv1.ParameterServerClient) error) error {
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() {
			c.rpcs.Add(1)
			errs[i] = f(i, s)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Batch is one step's lookups: Batch[core][table] lists the rows the core's
// examples look up, in example order, duplicates allowed.
type Batch [][][]int64

// Grads are one step's gradients, aligned with a Batch: Grads[core][table]
// holds len(Batch[core][table])·dim floats, the gradient of each looked-up
// position. Positions of the same row are summed.
type Grads [][][]float32

// Fetched is the result of a Lookup, and what Apply needs to send the
// step's gradients back to where the rows came from.
type Fetched struct {
	batch Batch
	// Per core and table: the distinct rows in first-seen order, and for
	// every position of the batch the index of its row among them.
	uniq [][][]int64
	pos  [][][]int32
	// values[core][table][u] is the value of distinct row u: a view into a
	// response buffer, never a copy.
	values [][][][]float32
	// Coalesced: per server, the packet's segments and, per (core, table,
	// distinct row), the row's index in its server's segment.
	packets []*packet
	where   [][][]int32
	// Uncoalesced: per core and table, the distinct rows by server.
	split [][]byServer
}

// packet is one server's coalesced packet.
type packet struct {
	vars   []int32
	counts []uint32
	rows   []int64
	index  []map[int64]int32 // per variable: row → its index in the segment
	// off[v] is the first float of variable v's segment in the packet's
	// values (and gradients); floats is their total.
	off    []int
	floats int
}

// Value returns the embedding of position i of core's batch of table t: a
// slice of the response buffer the row arrived in.
func (f *Fetched) Value(core, table, i int) []float32 {
	return f.values[core][table][f.pos[core][table][i]]
}

// dedup lists the distinct rows of ids in first-seen order and maps every
// position to its row's index.
func dedup(ids []int64, seen map[int64]int32) (uniq []int64, pos []int32) {
	clear(seen)
	pos = make([]int32, len(ids))
	for i, r := range ids {
		u, ok := seen[r]
		if !ok {
			u = int32(len(uniq))
			seen[r] = u
			uniq = append(uniq, r)
		}
		pos[i] = u
	}
	return uniq, pos
}

func (c *Client) checkBatch(b Batch) error {
	if c.step < 0 {
		return ErrInconsistent
	}
	if len(b) != c.cfg.Cores {
		return fmt.Errorf("%w: batch has %d cores, the client %d", ErrInvalid, len(b), c.cfg.Cores)
	}
	for core, tables := range b {
		if len(tables) != len(c.layout.Tables) {
			return fmt.Errorf("%w: core %d has %d tables, want %d", ErrInvalid, core, len(tables), len(c.layout.Tables))
		}
		for t, ids := range tables {
			for _, r := range ids {
				if r < 0 || r >= c.layout.Tables[t].Vocab {
					return fmt.Errorf("%w: core %d table %q: row %d out of [0, %d)", ErrInvalid, core, c.layout.Tables[t].Name, r, c.layout.Tables[t].Vocab)
				}
			}
		}
	}
	return nil
}

// Lookup fetches the rows of one step's batch.
func (c *Client) Lookup(ctx context.Context, b Batch) (*Fetched, error) {
	if err := c.checkBatch(b); err != nil {
		return nil, err
	}
	T := len(c.layout.Tables)
	f := &Fetched{batch: b, uniq: make([][][]int64, len(b)), pos: make([][][]int32, len(b)), values: make([][][][]float32, len(b))}
	seen := map[int64]int32{}
	for core := range b {
		f.uniq[core] = make([][]int64, T)
		f.pos[core] = make([][]int32, T)
		f.values[core] = make([][][]float32, T)
		for t := range T {
			f.uniq[core][t], f.pos[core][t] = dedup(b[core][t], seen)
			f.values[core][t] = make([][]float32, len(f.uniq[core][t]))
		}
	}
	if c.cfg.Mode == Uncoalesced {
		return f, c.lookupUncoalesced(ctx, f)
	}
	return f, c.lookupCoalesced(ctx, f)
}

func (c *Client) lookupCoalesced(ctx context.Context, f *Fetched) error {
	n := len(c.servers)
	V := len(c.layout.Variables)
	f.packets = make([]*packet, n)
	for s := range f.packets {
		f.packets[s] = &packet{index: make([]map[int64]int32, V)}
	}
	// Rows per server and variable, distinct across cores and tables of a
	// stack, in first-seen order (core-major).
	perVar := make([][][]int64, n)
	for s := range perVar {
		perVar[s] = make([][]int64, V)
	}
	f.where = make([][][]int32, len(f.uniq))
	for core := range f.uniq {
		f.where[core] = make([][]int32, len(f.uniq[core]))
		for t, rows := range f.uniq[core] {
			w := make([]int32, len(rows))
			for k, r := range rows {
				v, g := c.layout.Locate(t, r)
				s := c.layout.Server(g)
				p := f.packets[s]
				if p.index[v] == nil {
					p.index[v] = map[int64]int32{}
				}
				i, ok := p.index[v][g]
				if !ok {
					i = int32(len(perVar[s][v]))
					p.index[v][g] = i
					perVar[s][v] = append(perVar[s][v], g)
				}
				w[k] = i
			}
			f.where[core][t] = w
		}
	}
	for s, p := range f.packets {
		p.off = make([]int, V)
		for v, rows := range perVar[s] {
			if len(rows) == 0 {
				continue
			}
			p.vars = append(p.vars, int32(v))
			p.counts = append(p.counts, uint32(len(rows)))
			p.rows = append(p.rows, rows...)
			p.off[v] = p.floats
			p.floats += len(rows) * c.layout.Variables[v].Dim
		}
	}
	resp := make([][]float32, n)
	err := c.each(func(s int, srv psv1.ParameterServerClient) error {
		p := f.packets[s]
		r, err := srv.Lookup(ctx, &psv1.LookupRequest{Variables: p.vars, Counts: p.counts, Rows: p.rows}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: lookup on shard %d: %w", s, err)
		}
		if len(r.GetValues()) != p.floats {
			return fmt.Errorf("ps: lookup on shard %d: %d floats, want %d", s, len(r.GetValues()), p.floats)
		}
		resp[s] = r.GetValues()
		return nil
	})
	if err != nil {
		return err
	}
	// Split the packets by slicing: row i of variable v's segment starts
	// i·dim floats after the segment's first float.
	for core := range f.uniq {
		for t, rows := range f.uniq[core] {
			for k, r := range rows {
				s, o, d := c.slot(f, core, t, k, r)
				f.values[core][t][k] = resp[s][o : o+d : o+d]
			}
		}
	}
	return nil
}

// slot is where core's distinct row k of table t (row r) sits in the
// coalesced packets, for its value and its gradient alike: the floats
// [o, o+d) of server s's packet.
func (c *Client) slot(f *Fetched, core, t, k int, r int64) (s, o, d int) {
	v, g := c.layout.Locate(t, r)
	s = c.layout.Server(g)
	d = c.layout.Variables[v].Dim
	return s, f.packets[s].off[v] + int(f.where[core][t][k])*d, d
}

// byServer is one (core, table)'s distinct rows grouped by server: the
// variable rows each server is sent, and their indices among the distinct
// rows.
type byServer struct {
	rows  [][]int64
	index [][]int
}

// split groups the distinct rows of every (core, table) by server.
func (c *Client) split(f *Fetched) [][]byServer {
	n := len(c.servers)
	out := make([][]byServer, len(f.uniq))
	for core := range f.uniq {
		out[core] = make([]byServer, len(f.uniq[core]))
		for t, rows := range f.uniq[core] {
			b := byServer{rows: make([][]int64, n), index: make([][]int, n)}
			for k, r := range rows {
				_, g := c.layout.Locate(t, r)
				s := c.layout.Server(g)
				b.rows[s] = append(b.rows[s], g)
				b.index[s] = append(b.index[s], k)
			}
			out[core][t] = b
		}
	}
	return out
}

// fanout runs all jobs at once, as every TPU core sends its own RPCs: an
// uncoalesced step's parts must all be in flight together, since a server
// answers none before it has all of them.
func (c *Client) fanout(ctx context.Context, jobs int, f func(ctx context.Context, j int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for j := range jobs {
		wg.Go(func() {
			c.rpcs.Add(1)
			if err := f(ctx, j); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	return first
}

func (c *Client) lookupUncoalesced(ctx context.Context, f *Fetched) error {
	T, n := len(c.layout.Tables), len(c.servers)
	cores := len(f.uniq)
	f.split = c.split(f)
	return c.fanout(ctx, cores*T*n, func(ctx context.Context, j int) error {
		core, t, s := j/(T*n), j/n%T, j%n
		rows, index := f.split[core][t].rows, f.split[core][t].index
		v, _ := c.layout.Locate(t, 0)
		d := c.layout.Variables[v].Dim
		r, err := c.servers[s].Lookup(ctx, &psv1.LookupRequest{Variables: []int32{int32(v)}, Counts: []uint32{uint32(len(rows[s]))}, Rows: rows[s]}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: lookup of core %d table %q on shard %d: %w", core, c.layout.Tables[t].Name, s, err)
		}
		vals := r.GetValues()
		if len(vals) != len(rows[s])*d {
			return fmt.Errorf("ps: lookup on shard %d: %d floats, want %d", s, len(vals), len(rows[s])*d)
		}
		for i, k := range index[s] {
			f.values[core][t][k] = vals[i*d : (i+1)*d : (i+1)*d]
		}
		return nil
	})
}

// Apply sends the step's gradients and returns when every server has
// applied them. The step is then the client's new step.
func (c *Client) Apply(ctx context.Context, f *Fetched, g Grads) error {
	if c.step < 0 {
		return ErrInconsistent
	}
	T := len(c.layout.Tables)
	if len(g) != len(f.batch) {
		return fmt.Errorf("%w: grads for %d cores, the batch has %d", ErrInvalid, len(g), len(f.batch))
	}
	// Sum each core's positions of a row, in position order, from zero.
	sums := make([][][]float32, len(g))
	for core := range g {
		if len(g[core]) != T {
			return fmt.Errorf("%w: core %d: grads for %d tables, want %d", ErrInvalid, core, len(g[core]), T)
		}
		sums[core] = make([][]float32, T)
		for t := range T {
			d := c.layout.Tables[t].Dim
			if len(g[core][t]) != len(f.batch[core][t])*d {
				return fmt.Errorf("%w: core %d table %q: %d gradient floats, want %d", ErrInvalid, core, c.layout.Tables[t].Name, len(g[core][t]), len(f.batch[core][t])*d)
			}
			sum := make([]float32, len(f.uniq[core][t])*d)
			for i, u := range f.pos[core][t] {
				dst, src := sum[int(u)*d:int(u+1)*d], g[core][t][i*d:(i+1)*d]
				for e := range dst {
					dst[e] += src[e]
				}
			}
			sums[core][t] = sum
		}
	}
	step := c.step + 1
	var err error
	if c.cfg.Mode == Uncoalesced {
		err = c.applyUncoalesced(ctx, f, sums, step)
	} else {
		err = c.applyCoalesced(ctx, f, sums, step)
	}
	if err != nil {
		return err
	}
	c.step = step
	return nil
}

func (c *Client) applyCoalesced(ctx context.Context, f *Fetched, sums [][][]float32, step int64) error {
	// One packet per server: the rows of the lookup packet, their gradients
	// summed over the cores in core order, from zero — the order the server
	// uses when the step arrives in parts.
	grads := make([][]float32, len(c.servers))
	for s, p := range f.packets {
		grads[s] = make([]float32, p.floats)
	}
	for core := range sums {
		for t, rows := range f.uniq[core] {
			for k, r := range rows {
				s, o, d := c.slot(f, core, t, k, r)
				dst, src := grads[s][o:o+d], sums[core][t][k*d:(k+1)*d]
				for e := range dst {
					dst[e] += src[e]
				}
			}
		}
	}
	return c.each(func(s int, srv psv1.ParameterServerClient) error {
		p := f.packets[s]
		_, err := srv.Apply(ctx, &psv1.ApplyRequest{Step: step, Parts: 1, Part: 0, Variables: p.vars, Counts: p.counts, Rows: p.rows, Grads: grads[s]}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: apply of step %d on shard %d: %w", step, s, err)
		}
		return nil
	})
}

func (c *Client) applyUncoalesced(ctx context.Context, f *Fetched, sums [][][]float32, step int64) error {
	T, n := len(c.layout.Tables), len(c.servers)
	cores := len(sums)
	parts := uint32(cores * T)
	return c.fanout(ctx, cores*T*n, func(ctx context.Context, j int) error {
		core, t, s := j/(T*n), j/n%T, j%n
		rows, index := f.split[core][t].rows, f.split[core][t].index
		v, _ := c.layout.Locate(t, 0)
		d := c.layout.Variables[v].Dim
		grads := make([]float32, 0, len(rows[s])*d)
		for _, k := range index[s] {
			grads = append(grads, sums[core][t][k*d:(k+1)*d]...)
		}
		_, err := c.servers[s].Apply(ctx, &psv1.ApplyRequest{Step: step, Parts: parts, Part: uint32(core*T + t),
			Variables: []int32{int32(v)}, Counts: []uint32{uint32(len(rows[s]))}, Rows: rows[s], Grads: grads}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: apply of step %d, core %d table %q on shard %d: %w", step, core, c.layout.Tables[t].Name, s, err)
		}
		return nil
	})
}

// Checkpoint has every server write its shard at the current step and
// returns the step once all have: the step is then committed, and a server
// restarted from its checkpoints loses none of the updates up to it.
func (c *Client) Checkpoint(ctx context.Context) (int64, error) {
	if c.step < 0 {
		return 0, ErrInconsistent
	}
	step := c.step
	err := c.each(func(i int, s psv1.ParameterServerClient) error {
		if _, err := s.Checkpoint(ctx, &psv1.CheckpointRequest{Step: step}, callOpts...); err != nil {
			return fmt.Errorf("ps: checkpoint of step %d on shard %d: %w", step, i, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return step, nil
}

// Restore rolls every server back to its checkpoint of step (the last one
// the trainer committed) and makes it the client's step; the trainer then
// retrains the steps after it.
func (c *Client) Restore(ctx context.Context, step int64) error {
	err := c.each(func(i int, s psv1.ParameterServerClient) error {
		if _, err := s.Restore(ctx, &psv1.RestoreRequest{Step: step}, callOpts...); err != nil {
			return fmt.Errorf("ps: restore of step %d on shard %d: %w", step, i, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.step = step
	return nil
}

// Status returns every server's status, shard by shard.
func (c *Client) Status(ctx context.Context) ([]*psv1.StatusResponse, error) {
	out := make([]*psv1.StatusResponse, len(c.servers))
	err := c.each(func(i int, s psv1.ParameterServerClient) error {
		r, err := s.Status(ctx, &psv1.StatusRequest{}, callOpts...)
		out[i] = r
		return err
	})
	return out, err
}

// transferFloats bounds the floats of one Assign or one read of ReadTables:
// 16 MiB packets, well under MaxMessageBytes.
const transferFloats = 4 << 20

// tableRows calls f for every row of every table, server by server and
// variable by variable in row order, in runs of at most transferFloats
// floats: the rows of variable v on server s, and for each its table and
// table row.
func (c *Client) tableRows(f func(s, v int, rows []int64, tables []int, trows []int64) error) error {
	n := int64(len(c.servers))
	for s := range c.servers {
		for v, vr := range c.layout.Variables {
			per := max(transferFloats/vr.Dim, 1)
			var rows, trows []int64
			var tables []int
			flush := func() error {
				if len(rows) == 0 {
					return nil
				}
				err := f(s, v, rows, tables, trows)
				rows, tables, trows = rows[:0], tables[:0], trows[:0]
				return err
			}
			for k, t := range vr.Tables {
				off := vr.Offsets[k]
				// The first variable row of table t on server s.
				g := off + (int64(s)-off%n+n)%n
				for ; g < off+c.layout.Tables[t].Vocab; g += n {
					rows, tables, trows = append(rows, g), append(tables, t), append(trows, g-off)
					if len(rows) == per {
						if err := flush(); err != nil {
							return err
						}
					}
				}
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Assign writes every row of every table onto the servers and puts them at
// step: values[t] is table t's rows, row-major (Vocab × Dim floats). It is
// how a trainer moves tables it trained elsewhere onto the servers (the
// caught-up phase, paper III.B); the optimizer state restarts, so Adagrad
// tables lose their accumulators (SGD has none). The step is then the
// client's; Checkpoint it to make it one Restore can return to.
func (c *Client) Assign(ctx context.Context, step int64, values [][]float32) error {
	if step < 0 {
		return fmt.Errorf("%w: assign at step %d", ErrInvalid, step)
	}
	if len(values) != len(c.layout.Tables) {
		return fmt.Errorf("%w: values of %d tables, the layout has %d", ErrInvalid, len(values), len(c.layout.Tables))
	}
	for t, tb := range c.layout.Tables {
		if int64(len(values[t])) != tb.Vocab*int64(tb.Dim) {
			return fmt.Errorf("%w: table %q: %d floats, want %d × %d", ErrInvalid, tb.Name, len(values[t]), tb.Vocab, tb.Dim)
		}
	}
	err := c.tableRows(func(s, v int, rows []int64, tables []int, trows []int64) error {
		d := c.layout.Variables[v].Dim
		vals := make([]float32, 0, len(rows)*d)
		for i, r := range trows {
			vals = append(vals, values[tables[i]][r*int64(d):(r+1)*int64(d)]...)
		}
		c.rpcs.Add(1)
		_, err := c.servers[s].Assign(ctx, &psv1.AssignRequest{Step: step, Variables: []int32{int32(v)},
			Counts: []uint32{uint32(len(rows))}, Rows: rows, Values: vals}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: assign on shard %d: %w", s, err)
		}
		return nil
	})
	if err != nil {
		c.step = -1 // some servers may hold part of the new values
		return err
	}
	c.step = step
	return nil
}

// ReadTables reads every row of every table back from the servers: out[t]
// is table t row-major, as Assign takes it. A trainer's checkpoint of the
// model reads them, and tests compare them.
func (c *Client) ReadTables(ctx context.Context) ([][]float32, error) {
	out := make([][]float32, len(c.layout.Tables))
	for t, tb := range c.layout.Tables {
		out[t] = make([]float32, tb.Vocab*int64(tb.Dim))
	}
	err := c.tableRows(func(s, v int, rows []int64, tables []int, trows []int64) error {
		d := c.layout.Variables[v].Dim
		c.rpcs.Add(1)
		r, err := c.servers[s].Lookup(ctx, &psv1.LookupRequest{Variables: []int32{int32(v)}, Counts: []uint32{uint32(len(rows))}, Rows: rows}, callOpts...)
		if err != nil {
			return fmt.Errorf("ps: reading shard %d: %w", s, err)
		}
		vals := r.GetValues()
		if len(vals) != len(rows)*d {
			return fmt.Errorf("ps: reading shard %d: %d floats, want %d", s, len(vals), len(rows)*d)
		}
		for i, row := range trows {
			copy(out[tables[i]][row*int64(d):(row+1)*int64(d)], vals[i*d:(i+1)*d])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
