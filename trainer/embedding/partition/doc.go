// Package partition is the embedding partitioner (Ads paper V.A and VII.D):
// it decides how each embedding table is split and which SparseCore holds
// each piece, so that the SparseCores finish their embedding lookups and
// updates at the same time without exceeding any chip's HBM.
//
// It is pure: no I/O, no clocks except the injected one that measures solve
// time and bounds the exact search, deterministic for a given seed. The
// trainer calls it; the trainer reads configuration files, turns
// ErrOutOfMemory and ErrInvalidProblem into permanent training holds (paper
// VI.A) and executes lookups by following the Plan.
//
// # Interface
//
//	p, err := partition.ParseConfig(data)            // or build a Problem in Go
//	plan, err := partition.Solve(p, partition.Options{Solver: partition.Heuristic})
//	ps, err := plan.Locate("query_ids", row)          // one Placement per column range
//
// A Problem is tables (vocabulary, width, element size, optimizer, valency
// statistics, access-frequency profile, optional measured statistics), a
// Topology (chips, SparseCores per chip, HBM per chip, HBM bandwidth, access
// granularity, per-lookup and per-shard overheads) and a batch size.
// RowSharding builds the trainer's default plan before any solver runs (every
// table row-partitioned over all SparseCores, the paper's baseline); Evaluate
// fills in any plan's costs. A Plan lists Shards — {Table, ColFrom, ColTo,
// RowDist (all/block/cyclic), RowPart k of RowParts K, SparseCore} — and per
// table a Layout; Locate and LocateAppend map (table, row) to the shards
// holding that row's column ranges and the row's index inside each shard.
// Every plan carries a Report: its cost (the largest SparseCore time per
// step), the load imbalance of Eq. 1, per-SparseCore bytes and times, HBM
// per chip, a lower bound on the cost of any plan and the gap to it.
//
// # Strategies
//
// The paper's three kinds of model parallelism, usable together (V.A,
// Figure 4): table partitioning (a whole table on one SparseCore), column
// partitioning (the width split into shards; only for element-wise
// optimizers, since LAMB and SM3 need whole rows), and row partitioning (the
// vocabulary split into parts, by contiguous blocks or cyclically; cyclic
// spreads the hottest rows of a frequency-sorted vocabulary). A table's
// layout is c column shards times K row parts; candidates are powers of two
// (K may also be the SparseCore count) with c·K at most the number of
// SparseCores, and a layout whose largest shard does not fit a chip's HBM is
// not a candidate.
//
// # Cost model (cost.go, profile.go)
//
// Lookups are deduplicated per batch before they are exchanged (V.A), so a
// shard's work is the expected number of distinct rows of its part that one
// batch touches: Σ_r 1-(1-p_r)^(B·v) for B examples of valency v drawing rows
// with probabilities p_r (with a valency distribution, the generating function
// G_V replaces the fixed draws: Σ_r 1-G_V(1-p_r)^B). Each unique row costs
// its bytes — forward read, backward read and write of the row and of its
// per-element optimizer state, each rounded up to the HBM access
// granularity, so a column shard narrower than the granularity pays for the
// whole granule — over the SparseCore's share of the chip's HBM bandwidth,
// plus a per-lookup overhead; each shard also costs a fixed per-step
// overhead. A SparseCore's time is the sum over its shards; a plan's cost is
// the largest. Load imbalance is N·max_i B_i / Σ_i B_i over the bytes B_i
// each SparseCore accesses (Eq. 1). Measured statistics (feedback-directed
// partitioning, V.C): a measured mean valency or valency distribution,
// measured unique values per batch, a measured row-frequency profile (dense,
// or sparse: the hottest rows and a uniform or Zipf tail) or measured per-row
// deduplicated lookups override the configured assumptions table by table.
// The trainer's profiler (trainer/embedding/fdp) produces them from ~3% of batches.
//
// # Solvers
//
// Heuristic (heuristic.go), for hundreds of tables: layouts chosen from the
// LP relaxation, largest-shard-first greedy placement under the memory
// limits, then local search (moves, swaps, exact two-SparseCore
// re-partitions, re-splitting) and seeded random kicks. Exact (exact.go), for
// tens of tables: bin completion over the integer program, started from the
// heuristic's plan: SparseCores are filled one at a time, each completely,
// under a slack budget (the work the remaining SparseCores can still absorb
// below the incumbent's cost), with symmetry breaking, layout dominance and
// remembered dead remainders; stopped by a node limit or time budget. It
// proves the 20-table, 8-SparseCore benchmark optimal (gap 0), where an LP
// bound alone leaves a fraction of a percent: large shards leave gaps that
// only combinations of small tables fill, which no relaxation sees. Every
// plan reports a lower bound (bound.go): the LP relaxation
// (solved by gonum's simplex in exact mode and in closed form otherwise, the
// two checked against each other in tests), or the stronger integral-layout
// bound, or, when the exact search ran to the end, the bound it proved. The
// gap is (cost - bound) / cost; a search stopped early reports the gap to
// the root bound.
//
// What the package does not own: reading files, executing lookups, profiling
// batches and storing the statistics (the trainer and sigd do), and deciding
// when to re-partition.
package partition
