package results

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sigdata/sig/internal/figure"
)

// The constants of the run's costs (Prices), by name.
const (
	PriceGET  = "s3_get_per_1000_usd"
	PricePUT  = "s3_put_per_1000_usd"
	PriceCore = "ec2_core_hour_usd"
)

// Prices are the published prices the run's requests and CPU are priced
// at (NewCosts), one provider and region so that the comparison is one
// bill's: Amazon S3 Standard's per-request prices and an Amazon EC2
// on-demand core-hour, both in US East (N. Virginia). None was chosen to
// decide a target; the costs' sweeps show each at a quarter to four
// times its value. Figure 6's core_hour_usd (Constants) is another
// provider's price, kept for that figure.
func Prices() map[string]figure.Constant {
	return map[string]figure.Constant{
		PriceGET: {Value: 0.0004, Unit: "USD per 1,000 requests",
			Source: "Amazon S3 Standard, US East (N. Virginia), GET, SELECT and all other requests (HEAD included), https://aws.amazon.com/s3/pricing/ (Requests & data retrievals), as quoted current in March 2026 by cloudburn.io/blog/amazon-s3-pricing and c3x.dev/blog/s3-request-fees-explained; the live page not read here"},
		PricePUT: {Value: 0.005, Unit: "USD per 1,000 requests",
			Source: "Amazon S3 Standard, US East (N. Virginia), PUT, COPY, POST and LIST requests (DELETE free), https://aws.amazon.com/s3/pricing/, as quoted current in March 2026 by the same two pages; the live page not read here"},
		PriceCore: {Value: 0.0408, Unit: "USD per core-hour",
			Source: "Amazon EC2 m7g.large on-demand, Linux, US East (N. Virginia): $0.0816 an hour for 2 vCPUs, each a whole Graviton3 core (no SMT), https://aws.amazon.com/ec2/pricing/on-demand/, as quoted for June 2026 by factualminds.com/blog/amazon-ec2-on-demand-pricing-instance-families-2026; the live page not read here. The run's CPU seconds are of this machine's x86 cores, not Graviton3's"},
	}
}

// priceSweep is the factors each price is swept by.
var priceSweep = []float64{0.25, 0.5, 2, 4}

// RequestsUSD prices q: GETs, HEADs and other requests at the GET price,
// PUTs and LISTs at the PUT price, DELETEs free (S3's classes).
func RequestsUSD(q Requests, prices map[string]figure.Constant) float64 {
	get := float64(q.Kind(GET)+q.Kind(HEAD)+q.Kind(Other)) * prices[PriceGET].Value / 1000
	put := float64(q.Kind(PUT)+q.Kind(LIST)) * prices[PricePUT].Value / 1000
	return get + put
}

// CPUUSD prices CPU seconds at the core-hour.
func CPUUSD(seconds float64, prices map[string]figure.Constant) float64 {
	return seconds * prices[PriceCore].Value / 3600
}

// NewCosts prices the run's measured requests and CPU (modelled: the
// prices decide every value): what a GET and a PUT cost in core time; for
// each side (workers, SIG reader, LIG reader) its requests and its
// processes' CPU in USD and their ratio; and SIG's cost over LIG's were
// the object store a hosted one paid per request. Each is swept over each
// price it depends on. Nil without measured requests.
func NewCosts(r *Results, prices map[string]figure.Constant) figure.Set {
	if r.Store == nil {
		return nil
	}
	st, c := r.Store, r.CPU
	set := figure.Set{}
	pick := func(names ...string) map[string]figure.Constant {
		out := map[string]figure.Constant{}
		for _, n := range names {
			out[n] = prices[n]
		}
		return out
	}
	// add computes a figure at the prices, then with each of its
	// constants swept.
	add := func(name, unit, how string, f func(map[string]figure.Constant) float64, names ...string) {
		cs := pick(names...)
		fig := figure.Figure{Value: f(prices), Unit: unit, Kind: figure.Modelled, How: how, Constants: cs}
		for _, n := range slices.Sorted(maps.Keys(cs)) {
			for _, k := range priceSweep {
				p := maps.Clone(prices)
				pc := p[n]
				pc.Value *= k
				p[n] = pc
				fig.Sweep = append(fig.Sweep, figure.Point{Constant: n, At: pc.Value, Value: f(p)})
			}
		}
		set[name] = fig
	}
	coreMs := func(perThousand string) func(map[string]figure.Constant) float64 {
		return func(p map[string]figure.Constant) float64 {
			return p[perThousand].Value / 1000 / (p[PriceCore].Value / 3600) * 1000
		}
	}
	add("get_in_core_ms", "ms", "the price of one GET in milliseconds of a core at the core-hour's price", coreMs(PriceGET), PriceGET, PriceCore)
	add("put_in_core_ms", "ms", "the price of one PUT in milliseconds of a core at the core-hour's price", coreMs(PricePUT), PricePUT, PriceCore)
	for _, side := range []struct {
		name, what string
		q          Requests
		cpu        float64
	}{{"workers", "the `sigd worker` processes", st.Worker, c.Worker}, {"sig_reader", "the SIG reader", st.SIGReader, c.SIGReader},
		{"lig_reader", "the LIG reader", st.LIGReader, c.LIGReader}} {
		q, cpu := side.q, side.cpu
		add("requests_usd_"+side.name, "USD", fmt.Sprintf("the object-store requests of %s's phases (measured: %d) at the per-request prices", side.what, q.Total()),
			func(p map[string]figure.Constant) float64 { return RequestsUSD(q, p) }, PriceGET, PricePUT)
		add("cpu_usd_"+side.name, "USD", fmt.Sprintf("the CPU of %s (measured: %.1f s) at the core-hour's price", side.what, cpu),
			func(p map[string]figure.Constant) float64 { return CPUUSD(cpu, p) }, PriceCore)
		add("requests_over_cpu_"+side.name, "x", fmt.Sprintf("%s: its requests' cost over its CPU's; above 1, requests cost it more than its CPU", side.what),
			func(p map[string]figure.Constant) float64 { return ratio(RequestsUSD(q, p), CPUUSD(cpu, p)) }, PriceGET, PricePUT, PriceCore)
	}
	sig, lig := st.Worker.Add(st.SIGReader), st.LIGReader
	add("sig_over_lig_cost_hosted_store", "x",
		"SIG's cost over LIG's with a hosted object store paid per request instead of by its CPU: (the workers' and the SIG reader's CPU at the core-hour + their requests at the per-request prices) over (the LIG reader's CPU + its requests); MinIO's CPU, storage by the GB-month and transfer (free within a region) are not counted",
		func(p map[string]figure.Constant) float64 {
			return ratio(CPUUSD(c.SIG(), p)+RequestsUSD(sig, p), CPUUSD(c.LIG(), p)+RequestsUSD(lig, p))
		}, PriceGET, PricePUT, PriceCore)
	return set
}
