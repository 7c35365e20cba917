package gen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/sigdata/sig/transform"
)

// Config sizes a fleet; zero fields take the defaults (EnsureDefaults).
// doc.go's "Scale knobs" lists them.
type Config struct {
	// Seed selects the fleet.
	Seed uint64 `json:"seed"`
	// Pipelines over the whole run. Default 300.
	Pipelines int `json:"pipelines"`
	// Clients (teams). Default 24.
	Clients int `json:"clients"`
	// Epochs of the timeline. Default 12.
	Epochs int `json:"epochs"`
	// FirstEpoch pipelines arrive at epoch 0. Default 10.
	FirstEpoch int `json:"first_epoch"`
	// InputsMin and InputsMax bound a pipeline's model inputs (uniform).
	// Defaults 6 and 14.
	InputsMin int `json:"inputs_min"`
	InputsMax int `json:"inputs_max"`
	// ZipfS is the popularity exponent. Default 1.0.
	ZipfS float64 `json:"zipf_s"`
	// Variants are the parameter variants of each family. Default 3.
	Variants int `json:"variants"`
	// HistoryMin and HistoryMax bound a pipeline's initial range, in
	// slots. Defaults 4 and 12.
	HistoryMin int `json:"history_min"`
	HistoryMax int `json:"history_max"`
	// RetireRate is the probability that an active pipeline retires at
	// each epoch after its arrival. Default 0.1; negative (EnsureDefaults
	// makes it -1): none retire.
	RetireRate float64 `json:"retire_rate"`
}

// EnsureDefaults fills zero fields.
func (c Config) EnsureDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Pipelines, 300)
	def(&c.Clients, 24)
	def(&c.Epochs, 12)
	def(&c.FirstEpoch, 10)
	def(&c.InputsMin, 6)
	def(&c.InputsMax, 14)
	def(&c.Variants, 3)
	def(&c.HistoryMin, 4)
	def(&c.HistoryMax, 12)
	if c.ZipfS == 0 {
		c.ZipfS = 1
	}
	if c.RetireRate == 0 {
		c.RetireRate = 0.1
	}
	if c.RetireRate < 0 {
		c.RetireRate = -1 // none retire; stays negative, so that a fleet's Config regenerates it
	}
	return c
}

// Validate reports a configuration no fleet can have, naming the knob.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Pipelines < 1 || c.Pipelines > 100_000 {
		bad("pipelines %d: want 1 to 100000", c.Pipelines)
	}
	if c.Clients < 1 || c.Clients > 1000 {
		bad("clients %d: want 1 to 1000", c.Clients)
	}
	if c.Epochs < 1 || c.Epochs > 1000 {
		bad("epochs %d: want 1 to 1000", c.Epochs)
	}
	if c.FirstEpoch < 1 || c.FirstEpoch > c.Pipelines {
		bad("first-epoch %d: want 1 to pipelines (%d)", c.FirstEpoch, c.Pipelines)
	}
	if c.Epochs == 1 && c.FirstEpoch != c.Pipelines {
		bad("first-epoch %d: with one epoch every pipeline (%d) arrives in it", c.FirstEpoch, c.Pipelines)
	}
	if c.Variants < 1 || c.Variants > 64 {
		bad("variants %d: want 1 to 64", c.Variants)
	}
	if n := len(families()) * c.Variants; c.InputsMin < 1 || c.InputsMax < c.InputsMin || 2*c.InputsMax > n {
		bad("inputs %d to %d: want 1 <= min <= max <= half the population (%d components)", c.InputsMin, c.InputsMax, n)
	}
	if !(c.ZipfS >= 0 && c.ZipfS <= 10) {
		bad("zipf-s %v: want 0 to 10", c.ZipfS)
	}
	if c.HistoryMin < 1 || c.HistoryMax < c.HistoryMin || c.HistoryMax > 10_000 {
		bad("history %d to %d slots: want 1 <= min <= max <= 10000", c.HistoryMin, c.HistoryMax)
	}
	if !(c.RetireRate < 1) {
		bad("retire-rate %v: want a rate below 1 (negative: none retire)", c.RetireRate)
	}
	return errors.Join(errs...)
}

// Client is a team submitting pipelines.
type Client struct {
	Name string `json:"name"`
	// Tier is production, staging or exploration; Priority its base
	// priority (a pipeline's is within 100 above it).
	Tier     string `json:"tier"`
	Priority int32  `json:"priority"`
}

// Pipeline is one model's training pipeline.
type Pipeline struct {
	Client   string `json:"client"`
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	// Inputs are indexes into Fleet.Components, in the graph's order.
	Inputs []int `json:"inputs"`
	// DSL is the graph it submits.
	DSL string `json:"dsl"`
	// Arrive is the epoch of its first submission; Retire the first epoch
	// it no longer trains in (Epochs if it trains to the end).
	Arrive int `json:"arrive"`
	Retire int `json:"retire"`
	// History is the length of its initial range, in slots.
	History int `json:"history"`
}

// Fleet is a generated fleet.
type Fleet struct {
	Config     Config      `json:"config"`
	Components []Component `json:"components"`
	Clients    []Client    `json:"clients"`
	Pipelines  []Pipeline  `json:"pipelines"`
}

// Present is the slot the fleet's present has reached at an epoch: data of
// slots before it exists.
func (f *Fleet) Present(epoch int) int { return f.Config.HistoryMax + epoch }

// Slots is how many slots of data the fleet reads: those before the last
// epoch's present.
func (f *Fleet) Slots() int { return f.Present(f.Config.Epochs - 1) }

// Range is the slots [from, to) pipeline p is registered for after its
// submission at epoch e (Arrive <= e < Retire).
func (f *Fleet) Range(p *Pipeline, e int) (from, to int) {
	return f.Present(p.Arrive) - p.History, f.Present(e)
}

// Phase of a submission.
const (
	Initial  = "initial"   // the pipeline's first: its history
	CaughtUp = "caught-up" // a later one: one new slot
)

// Step is one submission of the timeline.
type Step struct {
	Epoch    int    `json:"epoch"`
	Pipeline int    `json:"pipeline"` // index into Fleet.Pipelines
	Phase    string `json:"phase"`
	// From and To are the registered range after the step, in slots; the
	// pipeline trains on [ReadFrom, To): its history at its arrival, then
	// the new slot.
	From     int `json:"from"`
	To       int `json:"to"`
	ReadFrom int `json:"read_from"`
}

// Steps lists the fleet's submissions in order: per epoch, the caught-up
// pipelines (in arrival order), then the arrivals.
func (f *Fleet) Steps() []Step {
	var out []Step
	for e := range f.Config.Epochs {
		var arrivals []Step
		for i := range f.Pipelines {
			p := &f.Pipelines[i]
			if e < p.Arrive || e >= p.Retire {
				continue
			}
			from, to := f.Range(p, e)
			if e == p.Arrive {
				arrivals = append(arrivals, Step{Epoch: e, Pipeline: i, Phase: Initial, From: from, To: to, ReadFrom: from})
			} else {
				out = append(out, Step{Epoch: e, Pipeline: i, Phase: CaughtUp, From: from, To: to, ReadFrom: to - 1})
			}
		}
		out = append(out, arrivals...)
	}
	return out
}

// Active returns the pipelines training at an epoch.
func (f *Fleet) Active(epoch int) int {
	n := 0
	for i := range f.Pipelines {
		if p := &f.Pipelines[i]; p.Arrive <= epoch && epoch < p.Retire {
			n++
		}
	}
	return n
}

// Generate makes the fleet of cfg (after EnsureDefaults).
func Generate(cfg Config) (*Fleet, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// One stream per concern, so that changing one knob (say the inputs
	// per model) leaves what the others decide (clients, timeline) alone.
	rng := func(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, stream)) }
	f := &Fleet{Config: cfg, Components: population(cfg.Variants, cfg.ZipfS, rng(1))}

	tiers := []struct {
		name string
		prio int32
	}{{"production", 600}, {"staging", 300}, {"exploration", 50}}
	for i := range cfg.Clients {
		t := tiers[i%len(tiers)]
		f.Clients = append(f.Clients, Client{Name: fmt.Sprintf("team%02d", i+1), Tier: t.name, Priority: t.prio})
	}

	// Arrivals: FirstEpoch at epoch 0, the rest evenly over the others
	// (the earlier epochs take the remainder).
	arrive := make([]int, 0, cfg.Pipelines)
	for range cfg.FirstEpoch {
		arrive = append(arrive, 0)
	}
	if rest := cfg.Pipelines - cfg.FirstEpoch; rest > 0 {
		per, extra := rest/(cfg.Epochs-1), rest%(cfg.Epochs-1)
		for e := 1; e < cfg.Epochs; e++ {
			n := per
			if e <= extra {
				n++
			}
			for range n {
				arrive = append(arrive, e)
			}
		}
	}

	cum := make([]float64, len(f.Components))
	sum := 0.0
	for i, c := range f.Components {
		sum += c.Weight
		cum[i] = sum
	}
	who, life, draw := rng(2), rng(3), rng(4)
	perClient := map[string]int{}
	for i := range cfg.Pipelines {
		c := f.Clients[who.IntN(len(f.Clients))]
		perClient[c.Name]++
		p := Pipeline{Client: c.Name, Name: fmt.Sprintf("%s-m%03d", c.Name, perClient[c.Name]),
			Priority: c.Priority + int32(who.IntN(100)), Arrive: arrive[i], Retire: cfg.Epochs,
			History: cfg.HistoryMin + life.IntN(cfg.HistoryMax-cfg.HistoryMin+1)}
		for e := p.Arrive + 1; e < cfg.Epochs; e++ {
			if life.Float64() < cfg.RetireRate {
				p.Retire = e
				break
			}
		}
		k := cfg.InputsMin + draw.IntN(cfg.InputsMax-cfg.InputsMin+1)
		chosen := map[int]bool{}
		for len(p.Inputs) < k {
			j := sort.SearchFloat64s(cum, draw.Float64()*sum)
			j = min(j, len(cum)-1)
			if !chosen[j] {
				chosen[j] = true
				p.Inputs = append(p.Inputs, j)
			}
		}
		p.DSL = f.graph(p.Inputs)
		if _, _, err := transform.ParseAndCheck([]byte(p.DSL), p.Name+".sig", transform.AdsSchema(), transform.Default(), transform.Limits{}); err != nil {
			return nil, fmt.Errorf("fleet: the graph of %s does not check (a bug of the generator): %w", p.Name, err)
		}
		f.Pipelines = append(f.Pipelines, p)
	}
	return f, nil
}

// graph writes a model's graph: one input per component, and a let for
// every subexpression two of its inputs share (as a model owner would
// write it; canonicalization erases the difference).
func (f *Fleet) graph(inputs []int) string {
	uses := map[string]int{}
	var order []*expr
	for _, j := range inputs {
		seen := map[string]bool{}
		f.Components[j].e.walk(func(e *expr) {
			if e.op == "col" || e == f.Components[j].e {
				return
			}
			s := e.String()
			if seen[s] {
				return
			}
			seen[s] = true
			if uses[s] == 0 {
				order = append(order, e)
			}
			uses[s]++
		})
	}
	lets := map[string]string{}
	var letExprs []*expr
	for _, e := range order {
		if uses[e.String()] > 1 {
			lets[e.String()] = fmt.Sprintf("s%d", len(letExprs)+1)
			letExprs = append(letExprs, e)
		}
	}
	var b strings.Builder
	for _, e := range letExprs {
		// A let's own expression is written out; the lets inside it are
		// referred to by name.
		fmt.Fprintf(&b, "let %s = %s\n", lets[e.String()], e.print(lets))
	}
	for _, j := range inputs {
		c := &f.Components[j]
		fmt.Fprintf(&b, "input %s = %s\n", c.Name, c.e.print(lets))
	}
	return b.String()
}
