// Package gen generates a fleet of model pipelines for SIG to serve (paper
// IV.A, VII.B: "amortization across thousands of models actively using
// SIG"): whose graphs they submit, for which clients at which priorities,
// when they arrive and retire, and over which event ranges they train. It
// is pure and deterministic: the same Config gives the same fleet, byte for
// byte (TestGoldenFleet pins one), and it depends on nothing of SIG's but
// transform, whose parser checks every graph it writes against the Ads
// schema (transform.AdsSchema).
//
// It does not submit, memoize, read or measure anything (fleet/run does,
// on a running sigd), nor generate events (warehouse/gen).
//
// # Components
//
// The graphs are drawn from a population of components (model inputs)
// built from the DSL's ops over the Ads schema, in families of the same
// ops, each family in Config.Variants parameter variants: near-duplicates
// such as hash(unigrams(lower(col("query"))), buckets=1000003) and the
// same with buckets=100003, or bucketize(col("bid_price"), ...) with other
// boundaries. Families nest shared subexpressions: unigrams(lower(col("query")))
// is inside token ids, token counts, query-title overlaps, unions and
// crosses with the category, so the canonical nodes of one feature sit in
// many components (the search index and subgraph eviction find them all).
// Every component of the population has its own canonical key (the tests
// check it with canon), so a model's inputs are distinct
// components.
//
// # Popularity
//
// Component popularity is Zipf: the component of rank r (from 1) is chosen
// with weight 1/r^s (Config.ZipfS). Ranks put every family's first variant
// (its common parameters) before any second variant, and so on; within a
// variant, families are in a seeded random order. A model draws its inputs
// without replacement by these weights, so the head of the population is
// in most models and the tail in few.
//
// The exponent is a guess, not a measurement: nothing public gives the
// popularity of features across production models. s = 1 is Zipf's law in
// its classic form (the rank-frequency law of words, which feature names
// written by people resemble), and the measured popularity of web objects,
// the nearest well-studied cousin (requests to shared caches), has s
// between 0.64 and 0.83 (Breslau et al., "Web Caching and Zipf-like
// Distributions", INFOCOM 1999). The default is 1.0; reuse depends on it
// (a larger s concentrates the models on fewer components), so the fleet's
// report shows the same fleet at other exponents.
//
// # Timeline
//
// Time is in slots of event time (one ingestion window each; fleet/run
// makes a slot a few raw blocks) and epochs. The warehouse holds
// Slots() slots; at epoch e the present is slot HistoryMax+e. A pipeline
// arrives at an epoch (FirstEpoch of them at epoch 0, the others evenly
// over the following epochs), is submitted for its initial training over
// the History slots before the present (HistoryMin to HistoryMax, so the
// ranges of pipelines overlap), and at every later epoch until it retires
// (each epoch with probability RetireRate) it is caught up: it submits
// again with its range extended to the new present and trains on the new
// slot. Retired pipelines stay registered with the range they last asked
// for (SIG has no way to unregister a pipeline); they request nothing more.
// Steps lists the submissions in order: in each epoch first the caught-up
// pipelines, in arrival order, then the arrivals.
//
// # Ledger
//
// Ledger counts, from the submissions alone, what a matching cache must
// answer when every submission is memoized before the next one: the
// (component, block) pairs each asks for and which of them an earlier one
// asked for (its block hits), the components already seen (component
// hits), and at the end how many pipelines use each pair: those whose
// latest range covers the block and whose graph has the component. It is
// the independent count fleet/run checks sigd's accounting against (with
// canonical keys and the catalog's blocks), and Plan runs it on the fleet
// itself, slots standing for blocks, to give the figures a fleet implies
// before it is run.
//
// # Scale knobs
//
//	Pipelines    300   model pipelines over the whole run
//	Clients      24    clients (teams), a third each at production, staging and
//	                   exploration priorities
//	Epochs       12    arrival epochs; the present moves one slot per epoch
//	FirstEpoch   10    pipelines arriving at epoch 0 (the fleet curve starts there)
//	InputsMin/Max 6/14 model inputs per pipeline (uniform)
//	ZipfS        1.0   popularity exponent (see above)
//	Variants     3     parameter variants per family (the population's size)
//	HistoryMin/Max 4/12 slots of a pipeline's initial training range
//	RetireRate   0.1   probability that an active pipeline retires at each later epoch
//	                   (negative: none retire; EnsureDefaults makes it -1)
//
// Rows per block, blocks per slot and the events they make are fleet/run's.
package gen
