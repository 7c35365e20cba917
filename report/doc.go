// Package report is the bench report: it reads the JSON files the
// benchmarks write under bench/ and makes one report of them, with SVG
// plots (internal/svgplot), as Markdown (`sigctl report`: bench/REPORT.md
// and bench/report/*.svg) and as HTML (the operator web UI's /ui/reports,
// sigd/ui). Both forms come from the same Report, so the UI shows the very
// plots the Markdown links.
//
// The inputs (Inputs, in report order) and what writes them:
//
//   - fleet-full.json and fleet-run.json: a fleet run on the real binaries
//     (fleet/results' schema sig.fleet.results/v1, `sigctl fleet`): hit
//     rate over time, reuse per memo block, CPU of SIG and LIG against
//     the fleet's size, the object store's requests and bytes per side
//     with MinIO's CPU split between them and their price beside the
//     CPU's (a run from before issue 28 says they were not measured),
//     Table I and the Figure 6 analog, and the issues' targets as this
//     build states them (results.NewTargets, recomputed from the file's
//     figures);
//   - scale.json: the control plane's scale curve (sig.scale/v1, sigd/scale,
//     bench/scale.sh): submit latency, queue throughput, Pebble bytes,
//     sigd's memory, eviction throughput against cached components (the
//     file's notes are not shown: the prose of bench/scale.notes in them
//     carries figures no JSON holds);
//   - fleet.json: the training fleet simulation (`trainer fleet`,
//     bench/trainer.sh): Table II, preempted epochs that commit, MPG per
//     job and of the fleet; beside it fleet-defaults.json, the same
//     simulation on its default constants alone, shows what this system's
//     measurements changed;
//   - preemption.json: real preemptions (trainer's
//     BenchmarkPreemptionCommits): the committed fraction and its sweep
//     over the notice bound, notice-to-checkpoint and notice-to-exit times;
//   - embeddings.json: Figure 7 and parameter-server coalescing (`trainer
//     embeddings-report`, bench/embeddings.sh).
//
// Every figure the report shows is a committed JSON's, or computed from
// one (a ratio, a growth factor), or a constant listed with its source.
// Every plot says whether it is measured or modelled (internal/figure's
// kinds: modelled when a model's constants decide what is drawn, and then
// the caption lists them with their sources) and which figure or number of
// the paper it mirrors. Every figure a file carries (its "figures",
// internal/figure) is listed with its kind, the paper's value, its
// constants and sources, and a plot per swept constant.
//
// A missing input makes a section that says it was not run and which
// command writes it; a malformed one is an error naming the file and the
// field (Build), never a partial report. Text from the inputs is escaped
// in both forms.
//
// What the package does not own: measuring anything (the benchmarks and
// fleet/run do), the inputs' schemas (fleet/results, sigd/scale, the
// trainer's commands; this package decodes the fields it shows and
// checks the versions), drawing (internal/svgplot), and serving the HTML
// (sigd/ui).
package report
