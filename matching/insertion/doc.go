// Package insertion owns SIG's insertion policy (paper IV.A, "Insertion",
// and its limitations 1 and 2; issue 20): for one model input, which nodes
// of its component to memoize — a worker task and an object per block —
// and which ops readers compute, over the memoized nodes and raw columns.
// The paper's SIG materializes every requested component whole; here any
// canonical node may be memoized (its key is the key of its cone, so a
// node's memo objects serve every graph that contains it), and a cheap
// input costs no task, object or GET at all.
//
// Decide is a pure, deterministic function of its Input and Config: the
// component's nodes in canonical order (inputs before users, root last),
// each with the measured compute cost per row of its op (workers' task
// statistics, which the matching cache keeps per op), the bytes per row its
// output takes (measured from its memo objects when it has some), and its
// reuse (the registered pipelines whose graphs need it), and the reader's
// cost to fetch a byte against the cost to compute. It walks the nodes
// bottom-up; for each node other than a raw column:
//
//   - compute = the op's cost + what the reader pays to have each input
//     (fetching it if memoized, computing it otherwise), per row;
//   - fetch = bytes per row x FetchNsPerByte + ObjectNs / BlockRows;
//   - cheap when compute <= CheapFactor x fetch: a memo object would not
//     save readers enough to be worth a task, an object and a GET per block;
//   - otherwise the cheaper, per row read, of computing it over its
//     inputs' cheapest ways (ReaderWeight x reader CPU) and fetching it
//     (ReaderWeight x fetch, plus its share over users x ReadsPerUser of
//     what memoizing costs once per block: the workers' cost of the whole
//     cone from raw columns, conservative since workers compute over memo
//     nodes ready beneath it when they can, plus its bytes priced at
//     StorageNsPerByte); a node already memoized costs nothing more.
//
// The cover is then the memoized nodes reached from the root without
// passing through another memoized node: the root alone is the paper's
// whole component; no node at all means readers compute the input from
// raw columns. A raw column is never a memo node beneath the root, even
// one memoized as another input's whole component: its op computes
// nothing, and its memo object would cost readers what the raw block's
// column does (issue 27; sigd's workers read it from the raw block too,
// matching's Describe). A per-input Override (Always, Never) replaces the decision
// for users who know better. Decision.Reason says why in numbers.
//
// Every default is documented where it is declared (Config), with its
// source: bench/transform.txt for op costs, bench/reader.txt for the cost
// of a fetched byte, guesses labelled as such. testdata/decide.txt holds
// the decisions (TestDecideData, datadriven, -rewrite).
//
// It does not measure anything (workers do; the matching cache keeps the
// statistics), count reuse (the matching frontend does), nor store covers
// (the matching cache's pipeline records).
package insertion
