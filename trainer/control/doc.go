// Package control is the trainer controller's decision logic as a
// deterministic state machine with no I/O (the design of etcd's raft): the
// caller feeds it Events — a host joined, a batch arrived, a step finished, a
// checkpoint was written, a preemption notice came, time passed — each with
// its time, and executes the Actions it returns: hand units to hosts, run a
// step, write a checkpoint, acquire or release chips, place a hold, exit.
// Everything the Ads paper asks of the controller is decided here and tested
// with data-driven scripts in testdata/.
//
// # Epochs and exactly-once training (paper III.C)
//
// The pipeline's event range is a sequence of raw blocks; one block is one
// work unit. An epoch is up to EpochUnits consecutive blocks not yet
// committed. An epoch attempt starts only with every one of the slice's
// Hosts connected (synchronous data parallelism). Hosts request units; the
// controller hands out the epoch's units in order, at most a fair share
// (remaining / hosts) per request, and answers "drain" once none remain (or a
// preemption notice stopped the handing out). A host reads each unit whole,
// says so with its row count, and sends batches; each batch says how many
// rows of which units it carries. A step consumes one batch from every host
// that has not finished (a slow host stalls the step: an input stall). The
// epoch ends when every host has sent its final batch and every step is
// done; the controller then checks that every unit handed out was trained
// exactly as many rows as were read, and writes a checkpoint of the model and
// the committed units (drain, quiesce, checkpoint). Anything failing before
// the checkpoint is durable — a host lost, a unit unreadable, the checkpoint
// write — fails the attempt: no checkpoint, the model is restored from the
// last one and the epoch is retrained, so every event reaches committed
// model state exactly once. After MaxAttempts failed attempts in a row the
// epoch is put on a permanent hold instead of looping. A controller restart
// is the same: it loads the last checkpoint and retrains what was not
// committed.
//
// # Versions and snapshots (issue 21)
//
// A raw block can change after it was sealed (late events, new labels,
// deletions: warehouse), and every change is a new version of the block.
// Blocks arrive with their version in one catalog snapshot (EvBlocks
// Snapshot), and a unit is a block at a version: a blockref.Ref
// (warehouse/blockref, which links no storage code), named as the
// warehouse names it, the block id, "<id>.v<N>" from version 2 on. Refs
// are compared as values here; the caller parses them from and prints
// them to its wire. Each epoch is planned from one snapshot, which
// ActStartAttempt names and the checkpoint's Progress records, so a
// checkpoint states which version of which block the model trained on,
// and a block appears at most once per epoch. A failed attempt is planned
// again from the snapshot the next refresh answers: nothing of the failed
// one committed. Under RetrainChanged (the default; RetrainPolicy says
// why the order) a block trained at an older version is offered again at
// its new one, after the blocks never trained, and counted
// (Progress.Retrained, Stats.RetrainedUnits): the paper's controller
// retraining "previous events with new labels" (III.C). Changed blocks do
// not count toward the head of the stream (the phase switch) and never
// place a hold. testdata/versions.txt and TestSimulatedExactlyOnce (blocks
// changing while hosts crash and checkpoints fail) check that every
// version an epoch claims is trained exactly once and none is lost.
//
// # Compaction (issue 28)
//
// The warehouse compacts the small blocks of a closed, quiet window into a
// new block whose version 1 holds their rows, in order, at the versions it
// compacted (Block.Parts, its lineage; warehouse/compact), and ends them:
// a snapshot after the compaction lists the compacted block and not the
// parts. Its version 1 holds the same event versions as the parts did, so
// for a compacted block it never trained (compaction.go):
//
//   - trained none of its parts: a new block, trained whole;
//   - trained every part at the version compacted (under RetrainNever, at
//     any version): nothing is owed, it is passed over
//     (Stats.CompactedCovered);
//   - trained some: its unit trains every row but those of the parts
//     trained at the version compacted (Action.Skips on start-attempt and
//     assign: the host reads the block whole and skips those rows), a
//     fresh block if a part was never trained, else a retrain of the parts
//     trained at older versions;
//   - at version 2 or more (it changed after the compaction) with a part
//     trained: a newer version of every event in it, trained whole as a
//     changed block is (under RetrainNever, passed over once every part
//     was trained; trained whole otherwise, the parts' rows being no
//     longer told apart).
//
// Once trained, it is a block like any other. The ledger records each
// unit's lineage and counts a compacted block's version 1 and its parts'
// units at the versions compacted as one set of event versions
// (trainer/checkpoint, Ledger.Check). testdata/compaction.txt walks the
// cases; TestCompactionExactlyOnce runs 300 seeds of compactions, changes
// and failures against the real ledger, and TestCompactionWithoutSkips
// TrainsTwice shows the skips are what keeps it.
//
// # Training holds (paper VI.A)
//
// A permanent error — setup failed permanently (invalid configuration, a
// graph the SIG frontend rejects: "compilation errors"), the slice could not
// be compiled (the partitioner is out of memory), the last checkpoint cannot
// be restored (corrupt), or the model refused a step (its loss was not
// finite) — fails the attempt, releases the chips and places a permanent
// hold; only HoldReleased (a person, through `sigctl hold release`) lifts it,
// after which the controller redoes setup and retrains from the last
// checkpoint. A transient stall — the next block's memoized data is still
// pending in SIG — places a transient hold at epoch planning ("as part of
// scheduling work units"): chips and readers are released, the controller
// stays up and asks its caller to watch for completion (WatchData); the next
// Blocks event whose first block is ready lifts the hold with no human
// action.
//
// # Stalls on SIG (issue 30)
//
// Releasing a slice for a short wait costs a restore and a compile when
// the data comes, so with Config.HoldAfter set (`trainer run
// --hold-after`) a job that holds its slice and finds the next epoch's
// first block pending keeps the chips and waits (StStalled): that wait is
// input stall, the device idle for want of input SIG has not made. It
// emits ActStall naming the block (the caller records what it waits on,
// and asks sigd why: trainer/accounting/stall charges the stall to it)
// and ActWatchData; the first Blocks event with the block ready starts the
// epoch on the kept slice. A stall that outlasts HoldAfter ends by a hold:
// the next event (a Tick) places the transient hold, which releases the
// chips, and the rest of the wait is hold, not stall. Every exit from
// StStalled (data ready, a hold, a preemption) emits ActStallEnd.
// Without HoldAfter (the default) the hold comes at once, as the paper's.
// testdata/stalls.txt walks it.
//
// # Preemption notices (paper VI.B)
//
// PreemptNotice (SIGTERM or an RPC, with a deadline; scope the whole job or
// one host) is broadcast to the hosts; no more units are handed out; hosts
// finish their outstanding units and drain; the epoch ends early and the
// units handed out are checkpointed. If the checkpoint is durable before
// the deadline the preempted epoch committed; otherwise its work is lost
// (goodput: preemption). A preempted job exits; a preempted host is told to
// exit, and the next epoch waits until it rejoins. The job's notice and the
// hosts' are kept apart: the job's takes effect even while a host's is
// pending, and a host's never moves the job's deadline (the host exits at
// its own; its loss before the checkpoint fails the attempt). An attempt
// that fails ends the notice: preempted hosts are told to exit at once, and
// a preempted job exits rather than retrain or hold. Stats counts preempted
// epochs and how many committed (the paper reports 61%).
//
// # Phases (paper III.A)
//
// Initial training runs on Chips chips reading memoized inputs (SIG). When
// the next epoch would include the head of the stream (the newest block the
// catalog knows), the job is caught up: it switches to CaughtUpChips chips,
// CaughtUpEpochUnits units per epoch, and its units are read with local input
// generation (LIG), which needs no memoized data.
//
// # Goodput
//
// The machine also classifies time for the MPG accounting: Allocate actions
// say how many chips the job holds and requests, Activity says what the held
// chips are doing between steps (initialization, compile, checkpoint restore
// or save, input stall, idle), and goodput actions mark committed
// checkpoints, failures, preemptions and phase changes. The caller records
// productive steps itself, with their measured device time.
//
// What the package does not own: any I/O or clock — executing the
// actions, the host protocol, the read solution, the checkpoint's bytes and
// the time events happened are the caller's (package trainer, the
// Controller) — and the goodput arithmetic (trainer/accounting/goodput: the
// machine only names categories and events).
package control
