package insertion

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
)

// Override is a pipeline input's owner's word on memoizing it.
type Override uint8

const (
	// Auto: the policy decides.
	Auto Override = iota
	// Always memoizes the whole component (the paper's SIG).
	Always
	// Never memoizes anything of it: readers compute it from raw columns.
	Never
)

func (o Override) String() string {
	switch o {
	case Always:
		return "always"
	case Never:
		return "never"
	}
	return "auto"
}

// ParseOverride reads "auto" (or ""), "always" or "never".
func ParseOverride(s string) (Override, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "always":
		return Always, nil
	case "never":
		return Never, nil
	}
	return Auto, fmt.Errorf("memoize override %q: want auto, always or never", s)
}

// Node is one canonical node of a component as the policy sees it.
type Node struct {
	Key  canon.Key
	Op   string
	Type transform.Type
	// Inputs index Input.Nodes; each is before the node.
	Inputs []int
	// OpNsPerRow is the measured compute cost per row of the node's op
	// (workers' task statistics for its OpClass); 0: unmeasured, the
	// Config's default for the op.
	OpNsPerRow float64
	// BytesPerRow is the measured size per row of the node's output (its
	// memo objects); 0: unmeasured, the Config's default for its type.
	BytesPerRow float64
	// Users are the registered pipelines whose graphs need the node, the
	// submitting one included (at least 1).
	Users int
	// Memoized: the node has memo objects already (some pipeline's cover
	// memoized it). Their cost is sunk: memoizing it costs nothing more,
	// so a node once memoized stays in the covers that can use it and
	// covers do not wander as reuse grows.
	Memoized bool
}

// Input is one model input's component.
type Input struct {
	// Nodes are the component's cone in canonical order: inputs before
	// users, the root last (canon.Component.Nodes).
	Nodes    []Node
	Override Override
	// BlockRows is the mean rows of the blocks read; 0: Config.BlockRows.
	BlockRows float64
}

// Decision is a cover: the memoized nodes a reader fetches, the residual
// ops it computes over them, and why.
type Decision struct {
	// Memo indexes Input.Nodes, in canonical order: exactly the root when
	// the whole component is memoized, empty when readers compute the input
	// from raw columns.
	Memo []int
	// Whole is true when Memo is the root alone.
	Whole  bool
	Reason string
	// The policy's estimates for this cover, per row: what a reader spends
	// on the input, what memoizing its memo nodes costs workers (each
	// computed from raw columns, counted once however many pipelines share
	// it), and the bytes its memo nodes store.
	ReaderNsPerRow, WorkerNsPerRow, BytesPerRow float64
}

// Config are the policy's constants. Zero fields take the defaults
// (EnsureDefaults).
type Config struct {
	// MemoizeAll is the paper's policy: every component memoized whole,
	// whatever it costs (IV.A "Insertion": "materializing all requested
	// data"). For comparison (bench/insertion.sh) and for clusters that
	// want it.
	MemoizeAll bool
	// OpNsPerRow are the compute costs per row of ops (by OpClass) not yet
	// measured. Default DefaultOpNsPerRow.
	OpNsPerRow map[string]float64
	// TypeBytesPerRow are the output sizes per row of nodes not yet
	// measured, by type. Default DefaultTypeBytesPerRow.
	TypeBytesPerRow map[transform.Type]float64
	// FetchNsPerByte is a reader's CPU per byte fetched from the object
	// store and copied into a batch (ranged GET, CRC-32C, decode). Default
	// 0.6: bench/reader.txt's SIG readers spend 62-127 CPU ns per example
	// of 68-124 bytes, which includes the labels and the gRPC send.
	FetchNsPerByte float64
	// ObjectNs is a reader's CPU per memo object read (one request, its
	// signing and the object's footer). Default 60000 ns, a guess.
	ObjectNs float64
	// BlockRows spreads ObjectNs over a block's rows when the Input gives
	// none. Default 50000 (a guess: blocks of an hour of a partition).
	BlockRows float64
	// StorageNsPerByte prices a byte of memo storage in CPU ns. Default
	// 2.0, a guess: a byte kept about an hour at public-cloud list prices
	// (0.02 USD per GB-month of object storage against 0.04 USD per
	// CPU-hour puts a GB-month at 1800 CPU-ns per byte).
	StorageNsPerByte float64
	// ReaderWeight is what a reader CPU-ns is worth in worker CPU-ns.
	// Default 4, a guess from the paper: readers sit on the training input
	// path, where a stall idles accelerators (IV.B; VII.B: LIG readers
	// could not be given enough CPU, and TPU utilization suffered), while
	// workers are batch work on a shared pool. With 4, an expensive input
	// of a single pipeline is still memoized (its readers would spend
	// several times the fetch on it).
	ReaderWeight float64
	// CheapFactor: a node whose computing costs a reader at most this
	// times what fetching it would is computed by readers, whatever its
	// reuse. Default 1.25: the reader-CPU budget of issue 20 (readers may
	// spend at most 1.2x what reading every input memoized costs) leaves
	// no room for more on any one input.
	CheapFactor float64
	// ReadsPerUser is how often each pipeline reads a block. Default 1:
	// recommendation models train one pass over fresh data (paper III).
	ReadsPerUser float64
}

// DefaultOpNsPerRow are op costs per row from bench/transform.txt (arrow
// rows per CPU-second, one core, Ads-like rows), rounded.
var DefaultOpNsPerRow = map[string]float64{
	"col": 0, "lower": 40, "strip_punct": 70, "unigrams": 56, "ngrams": 87,
	"intersect": 145, "union": 306, "concat": 32, "dedupe": 188, "truncate": 1,
	"length": 1, "hash": 11, "hash/list": 59, "cross": 74, "bucketize": 6,
	"log1p": 13, "clip": 2, "fill_missing": 2,
	"": 50, // an op the table does not know: a guess
}

// DefaultTypeBytesPerRow are output sizes per row, guesses for Ads-like
// data: 8 bytes and a validity bit for scalars, a 4-byte offset and about
// 20 bytes for strings, about 5 elements for lists.
var DefaultTypeBytesPerRow = map[transform.Type]float64{
	transform.Int64: 8.125, transform.Float64: 8.125, transform.String: 24,
	transform.ListString: 64, transform.ListInt64: 44,
}

// EnsureDefaults fills zero fields.
func (c Config) EnsureDefaults() Config {
	if c.OpNsPerRow == nil {
		c.OpNsPerRow = DefaultOpNsPerRow
	}
	if c.TypeBytesPerRow == nil {
		c.TypeBytesPerRow = DefaultTypeBytesPerRow
	}
	def := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.FetchNsPerByte, 0.6)
	def(&c.ObjectNs, 60000)
	def(&c.BlockRows, 50000)
	def(&c.StorageNsPerByte, 2)
	def(&c.ReaderWeight, 4)
	def(&c.CheapFactor, 1.25)
	def(&c.ReadsPerUser, 1)
	return c
}

// OpClass is the class an op's cost is measured and looked up under: the
// op, with "/list" for a hash of a list (a hash per element, five times a
// scalar's in bench/transform.txt).
func OpClass(op string, inputs []transform.Type) string {
	if op == "hash" && len(inputs) > 0 && inputs[0].IsList() {
		return "hash/list"
	}
	return op
}

// Decide chooses the cover of one model input. It is pure: the same Input
// and Config give the same Decision.
func Decide(in Input, cfg Config) Decision {
	cfg = cfg.EnsureDefaults()
	n := len(in.Nodes)
	if n == 0 {
		return Decision{Reason: "no nodes"}
	}
	root := n - 1
	blockRows := in.BlockRows
	if blockRows <= 0 {
		blockRows = cfg.BlockRows
	}
	bytes := make([]float64, n)
	opCost := make([]float64, n)
	for i := range in.Nodes {
		nd := &in.Nodes[i]
		bytes[i] = nd.BytesPerRow
		if bytes[i] <= 0 {
			bytes[i] = cfg.TypeBytesPerRow[nd.Type]
		}
		opCost[i] = nd.OpNsPerRow
		if opCost[i] <= 0 && nd.Op != "col" {
			ins := make([]transform.Type, len(nd.Inputs))
			for x, j := range nd.Inputs {
				ins[x] = in.Nodes[j].Type
			}
			c, ok := cfg.OpNsPerRow[OpClass(nd.Op, ins)]
			if !ok {
				c = cfg.OpNsPerRow[""]
			}
			opCost[i] = c
		}
	}
	fetch := func(i int) float64 { return bytes[i]*cfg.FetchNsPerByte + cfg.ObjectNs/blockRows }
	// worker[i]: a worker's cost of memoizing node i from raw columns: its
	// cone's ops, the raw columns it reads and the object it writes.
	cones := make([][]int, n)
	worker := make([]float64, n)
	for i := range in.Nodes {
		cone := []int{i}
		for _, j := range in.Nodes[i].Inputs {
			cone = append(cone, cones[j]...)
		}
		slices.Sort(cone)
		cones[i] = slices.Compact(cone)
		for _, j := range cones[i] {
			if in.Nodes[j].Op == "col" {
				worker[i] += bytes[j] * cfg.FetchNsPerByte
			} else {
				worker[i] += opCost[j]
			}
		}
		worker[i] += bytes[i] * cfg.FetchNsPerByte
	}
	// Bottom-up, each node's cheapest way for a reader to have it, in
	// weighted ns per row read: fetching it (with its share, over its
	// users, of what memoizing it costs once) or computing it over its
	// inputs had their cheapest ways. reader[i] is the unweighted reader
	// CPU of the way chosen.
	have := make([]float64, n)
	reader := make([]float64, n)
	memo := make([]bool, n)
	why := make([]string, n)
	for i := range in.Nodes {
		nd := &in.Nodes[i]
		if nd.Op == "col" {
			reader[i] = bytes[i] * cfg.FetchNsPerByte
			have[i] = cfg.ReaderWeight * reader[i]
			continue
		}
		computeReader, computeCost := opCost[i], cfg.ReaderWeight*opCost[i]
		for x, j := range nd.Inputs {
			if !slices.Contains(nd.Inputs[:x], j) {
				computeReader += reader[j]
				computeCost += have[j]
			}
		}
		users := float64(max(nd.Users, 1)) * cfg.ReadsPerUser
		once := worker[i] + bytes[i]*cfg.StorageNsPerByte
		if nd.Memoized {
			once = 0 // its objects exist: their cost is sunk
		}
		fetchCost := cfg.ReaderWeight*fetch(i) + once/users
		switch {
		case nd.Memoized && computeReader > fetch(i):
			memo[i] = true
			why[i] = fmt.Sprintf("already memoized: fetching it costs readers %.1f ns/row, computing it %.1f", fetch(i), computeReader)
		case computeReader <= cfg.CheapFactor*fetch(i):
			// The factor exactly as configured: %.2g printed 1.25 as "1.2".
			why[i] = fmt.Sprintf("cheap: readers compute it for %.1f ns/row, within %sx of the %.1f fetching it would cost",
				computeReader, strconv.FormatFloat(cfg.CheapFactor, 'g', -1, 64), fetch(i))
		case fetchCost < computeCost:
			memo[i] = true
			why[i] = fmt.Sprintf("memoized: fetching costs %.1f a row read (readers %.1f weighted, plus %.1f once for workers and %.0f B/row stored, over %d pipeline(s)), computing %.1f",
				fetchCost, cfg.ReaderWeight*fetch(i), worker[i], bytes[i], max(nd.Users, 1), computeCost)
		default:
			why[i] = fmt.Sprintf("computed by readers: %.1f a row read (weighted), fetching would cost %.1f (readers %.1f weighted, plus %.1f once for workers and %.0f B/row stored, over %d pipeline(s))",
				computeCost, fetchCost, cfg.ReaderWeight*fetch(i), worker[i], bytes[i], max(nd.Users, 1))
		}
		if memo[i] {
			have[i], reader[i] = fetchCost, fetch(i)
		} else {
			have[i], reader[i] = computeCost, computeReader
		}
	}
	d := Decision{}
	// An owner's override wins over any policy.
	switch {
	case in.Override == Always:
		d.Memo = []int{root}
		d.Reason = "always memoized whole (the pipeline input's override)"
	case in.Override == Never:
		d.Reason = "never memoized (the pipeline input's override): readers compute it from raw columns"
	case cfg.MemoizeAll:
		d.Memo = []int{root}
		d.Reason = "memoized whole (policy: memoize every component)"
	default:
		d.Memo = frontier(in.Nodes, root, memo)
		d.Reason = reason(in, root, d.Memo, why)
	}
	d.Whole = len(d.Memo) == 1 && d.Memo[0] == root
	// The estimates of the chosen cover.
	chosen := make([]bool, n)
	for _, i := range d.Memo {
		chosen[i] = true
		d.WorkerNsPerRow += worker[i]
		d.BytesPerRow += bytes[i]
	}
	d.ReaderNsPerRow = readerCost(in.Nodes, root, chosen, opCost, fetch, bytes, cfg.FetchNsPerByte)
	return d
}

// frontier returns the memoized nodes reached from root without passing
// through another memoized node, in canonical order.
func frontier(nodes []Node, root int, memo []bool) []int {
	seen := make([]bool, len(nodes))
	var out []int
	var walk func(i int)
	walk = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		if memo[i] {
			out = append(out, i)
			return
		}
		for _, j := range nodes[i].Inputs {
			walk(j)
		}
	}
	walk(root)
	slices.Sort(out)
	return out
}

// readerCost is what a reader spends per row on the input under a cover:
// fetching the memo nodes reached, computing every other node reached once.
func readerCost(nodes []Node, root int, memo []bool, opCost []float64, fetch func(int) float64, bytes []float64, perByte float64) float64 {
	seen := make([]bool, len(nodes))
	total := 0.0
	var walk func(i int)
	walk = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		switch {
		case memo[i]:
			total += fetch(i)
		case nodes[i].Op == "col":
			total += bytes[i] * perByte
		default:
			total += opCost[i]
			for _, j := range nodes[i].Inputs {
				walk(j)
			}
		}
	}
	walk(root)
	return total
}

// reason says why the cover is what it is: the root's decision, then each
// memo node's beneath it.
func reason(in Input, root int, memo []int, why []string) string {
	if len(memo) == 1 && memo[0] == root {
		return "whole component " + why[root]
	}
	var b strings.Builder
	if len(memo) == 0 {
		b.WriteString("readers compute it from raw columns; ")
	} else {
		fmt.Fprintf(&b, "readers compute %s over %d memo node(s); ", in.Nodes[root].Op, len(memo))
	}
	b.WriteString("root " + in.Nodes[root].Op + " " + why[root])
	for _, i := range memo {
		fmt.Fprintf(&b, "; node %s %s %s", in.Nodes[i].Key.Short(), in.Nodes[i].Op, why[i])
	}
	return b.String()
}
