// Package stall is the ledger of a job's input stall (issue 30): every
// second the device waited for input (goodput's input_stall, MPG paper
// §4) charged to exactly one cause, so a job's owner can see which work
// the job waited on — "12 min waiting on unigrams(lower(col("query"))),
// block b3, queued behind 340 tasks of client ranking at priority 900" —
// the way the MPG paper attributes every lost chip-second to a cause.
//
// It is a pure function, Compute(Input) Ledger, of three records:
//
//   - the stall: the job's measured input-stall intervals (the goodput
//     timeline's, wall time; the chips are constant over an interval, so
//     chip-seconds are these times the slice's chips);
//   - the waits: what the controller and the hosts needed and did not
//     have, and from when to when. The controller records a wait per
//     pending model input of the block an epoch could not start with
//     (SIG-side); a host records a wait for a unit whose read was under
//     way while its batch was late (reader-side), with the reader's phase
//     as its kind: fetch, decode, guard, send, or unavailable;
//   - sigd's explanations: snapshots, each at an instant, of why a pending
//     memo entry is not ready (ExplainPending: queued behind N tasks of
//     which clients at which priorities, leased and running for T, failed
//     or quarantined, waiting for ingestion, evicted and recomputing).
//
// # Rules
//
// The stall's instants are cut at every boundary of a stall interval, a
// wait and an explanation; each piece is charged whole to one cause:
//
//  1. Only stalled time is charged. A wait outside the stall (the device
//     was stepping, or held: a stall that ends by a hold stops being
//     charged when the hold is placed) costs nothing. Overlapping stall
//     intervals count once. Sum of the lines == the stall, exactly.
//  2. Of the waits open at an instant, one binds: the one ending last —
//     a synchronous step needs every host's batch, so the stall could
//     not have ended before the last wait did, and the waits that ended
//     earlier would have been waited through anyway (the critical path).
//     Then the one that began first; then SIG-side before reader-side (a
//     reader cannot deliver what SIG has not made); then by who, unit,
//     input, component, block, kind and reader, so the result never
//     depends on order.
//     An open wait (End zero) ends at the last stall's end: it ends last.
//  3. A reader-side wait is charged to its own kind and reader. A
//     SIG-side wait's kind at an instant is sigd's last explanation of its
//     entry at or before the instant; before the first explanation, the
//     first (the state sigd found when first asked is taken to have held
//     since the wait began); with none, Pending. Answers given at one
//     instant are ordered by what they say (kind, time running, detail,
//     work ahead), the last of them taken, whatever order they came in.
//  4. A queued (or recomputing) entry's line names the work ahead of it
//     that weighed most (Dominant): the (client, priority) with the most
//     tasks ahead, then the higher priority, then the client first by
//     name. The count of tasks ahead is not part of the cause (it changes
//     with every answer; it would split one wait into hundreds of lines):
//     a line keeps the most seen, and how many of them were the named
//     client's.
//  5. Stalled time no wait covers is Unrecorded: charged, so that the sum
//     holds, and shown, so that a gap in the recording is not hidden.
//
// A unit waiting on two inputs is two waits; by rule 2 the one ready
// last is charged for their overlap. A change of explanation (a
// pipeline's priority raised, its task leased) starts a new charge, so
// the ledger's Charges show when the cause changed.
//
// What this package does not own: measuring the stall
// (trainer/accounting/goodput), recording the waits (package trainer's
// controller and hosts), asking sigd (package trainer's stall watcher),
// and sigd's answers (sigd, workers.Queue.Explain).
package stall
