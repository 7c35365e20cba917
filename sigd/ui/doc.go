// Package ui is the operator console: the web UI that sigd serves under
// /ui/ on its HTTP port, through which operators search components, read a
// component's blocks (each with its state and its error or pending reason,
// e.g. a quarantine for a value mismatch the readers' guard found) and how
// many such mismatches sigd confirmed for it, what it shares with others,
// dry-run and confirm a
// subgraph eviction, evict or recompute one block, release quarantined
// tasks, read the audit log, and watch the overview: block hit rate, queued
// tasks and workers, and each training job's MPG with why its program
// goodput is what it is (paper IV.A, "Eviction"; the MPG paper), and read
// the bench reports of sigd's --reports directory (reports.go: a page per
// directory of bench JSON files, package report's HTML with its SVG plots,
// each marked measured or modelled).
//
// It owns what makes the console safe and readable:
//
//   - logins with an operator token (other roles get no session), and
//     sessions: random ids in HttpOnly, SameSite=Strict cookies (Secure
//     behind an HTTPS proxy) that expire after Config.SessionTTL;
//   - CSRF: every state-changing form carries its session's token, and the
//     login form a double-submit token, so no other site can post either;
//   - security headers on every response: a CSP that allows no script, no
//     framing, nosniff, no caching;
//   - the pages: server-rendered HTML (html/template escapes every value:
//     pipeline names, column names and DSL are user-supplied), no
//     JavaScript, templates and style embedded in the binary (web/);
//   - the overview's charts (chart.go): series sampled every
//     Config.SampleEvery (Run), drawn on the server as inline SVG by a pure
//     function of the samples (axes with units, ticks chosen from the data,
//     UTC times, hover titles with each sample's values, current and largest
//     values beside each chart; testdata/charts.txt and ticks.txt pin them).
//
// It does not own what it shows or does: the bench reports are package
// report's (made from the files when a page is opened); eviction decides
// and orders removals (eviction.Evictor: Plan, Evict, EvictBlock, RecomputeBlock, with
// their audit entries), matching holds the components, memo entries and
// audit log, workers the queues and quarantine, and sigd wires all of it
// into a Config (the stats, quarantine and trainer statuses are sigd's
// functions) and mounts Handler. Nothing imports this package but sigd.
//
// # The trainer page (issue 30)
//
// /ui/trainer/{client}/{job} shows why a job waited: its input stall by
// cause as the trainer reported it (TrainerStatus.stall, the ledger of
// trainer/accounting/stall), a bar chart of it by cause kind
// (internal/svgplot, every text escaped) and a table; what the pipeline's
// pending entries wait on now (sigd's ExplainPending); and a form, CSRF
// checked like every other, that sets the pipeline's priority as
// set-priority does (POST /ui/priority, logged under the operator's name).
//
// # Tests
//
// The browser and HTTP tests run on eviction's end-to-end environment
// (sigd/evictiontest: a sigd in process on a real MinIO and kfake with
// the pipelines that share a faulty subgraph), the same one eviction's
// gRPC tests use: logins and roles, CSRF on every form, escaping of
// user-supplied names, block actions, a guard's quarantine on the component
// page and in the audit log (TestUIShowsGuardMismatch), the reports, the trainer page's
// stall by cause and its priority form (TestBrowserTrainerStall), and the operator's
// path in a real headless Chromium (screenshots under testartifacts/ui).
package ui
