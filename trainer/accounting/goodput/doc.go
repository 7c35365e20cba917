// Package goodput accounts for the emulated fleet's chip-time the way the MPG
// paper (Google's study of its TPU fleet that defines ML Productivity Goodput)
// does: MPG = SG × RG × PG, per job, per phase and for the fleet, with every
// chip-second classified so a low number can be explained. Training holds,
// preemption notices and the initial and caught-up phases come from the Ads
// paper (Kurian et al., "Scalable Machine Learning Training Infrastructure for
// Online Ads Recommendation and Auction Scoring Modeling at Google").
//
// The package is pure. A Recorder, fed explicit timestamps by the trainer,
// builds a Timeline; Compute turns a Timeline into a Report; WriteText,
// WriteJSON and RegisterMetrics render a Report. Nothing here reads the clock
// or does I/O of its own.
//
// # Input
//
// A Timeline is a fleet of Capacity.Chips chips over [Capacity.Start,
// Capacity.End) and, per job:
//
//   - Allocations: over [Start, End) the job requested Requested chips and
//     held Held of them. Outside every allocation the job demands nothing.
//   - Intervals: what the held chips did, one thing at a time: Initialization,
//     Compile, InputStall, CheckpointSave, CheckpointRestore, Hold, Idle, or
//     Productive (training steps; the interval's length is their actual
//     device time and Ideal their time at peak).
//   - Events: Checkpoint (committed), Failure, Preemption.
//   - PhaseChanges: the job is in DefaultPhase ("initial") until its first
//     change, then in the named phase (e.g. "caught-up", Ads paper III.A)
//     until the next.
//
// # Classification
//
// Compute cuts each job's time at every record boundary. In each slice of
// length d, with r chips requested and h held:
//
//   - r = 0: nothing; the job neither asks for nor holds chips.
//   - 0 <= h < r: not all-allocated. h×d is PartialAllocation and (r-h)×d
//     UnmetDemand (queued when h = 0). What the held chips do does not matter:
//     a bulk-synchronous job needs all its chips up at once to make progress
//     (MPG paper §4, Scheduling Goodput, Figure 10). A Productive interval
//     here is invalid.
//   - h = r: all-allocated; r×d goes to the interval's category, or Idle if
//     none. A Productive slice is Productive if the first event at or after
//     its end is a Checkpoint (a checkpoint wins a tie), LostWork if it is a
//     Failure or Preemption (training restarts from the previous checkpoint,
//     so the work is redone: MPG paper §4, "work done between the last
//     checkpoint and failure (or preemption) doesn't count as productive";
//     Ads paper III.C and VI), and Uncommitted if no event follows (the run
//     ended, or the snapshot was taken, before a checkpoint). Its ideal time
//     is counted pro rata, and only when committed.
//
// # Quantities
//
// Chip-time is chips × duration, summed exactly in chip-nanoseconds and
// reported in chip-seconds. For any scope (fleet, job, phase, job×phase):
//
//	all-allocated = productive + initialization + compile + input_stall
//	              + checkpoint_save + checkpoint_restore + hold + idle
//	              + lost_work + uncommitted
//	held          = all-allocated + partial_allocation
//	demand        = held + unmet_demand                      (Σ r×d)
//	capacity      = held + unallocated                       (fleet only)
//	ideal         = Σ over committed steps of Ideal × chips
//
//	SG  = all-allocated / capacity       for the fleet (MPG paper §4: "the
//	      numerator of SG is ... 'all-allocated' time. The denominator is
//	      fleet capacity, expressed as chip-time")
//	SG  = all-allocated / demand         for a job, a phase, or a job's phase:
//	      a segment of the fleet (§4 asks that MPG be decomposable by
//	      workload; Figure 12 segments SG by job size) has no capacity of its
//	      own, so its denominator is the chip-time it asked for. For one job
//	      that asks for the whole fleet the two agree.
//	RG  = productive / all-allocated     (§4: "the numerator of RG is the
//	      productive chip-time of the application's progress that has been
//	      saved in checkpoints ... The denominator of RG is the allocated
//	      chip-time defined as the numerator of SG")
//	PG  = ideal / productive             (§4: ideal execution time from model
//	      FLOPs at peak over actual execution time; 1 is the roofline)
//	MPG = SG × RG × PG
//
// PG is taken over the committed steps, the same chip-time that is RG's
// numerator, so the product telescopes: fleet MPG = ideal / capacity, the
// share of the fleet that did useful work at peak, like the iron law of
// processor performance the paper models MPG on (§4, Figure 8). A ratio whose
// denominator is zero is 0.
//
// The lost-time breakdown is the categories other than productive. They map
// onto the paper's §5, Table 2 ("optimizing different components of MPG"):
// partial_allocation and unallocated are what the scheduler recovers (SG);
// initialization, compile, input_stall, checkpoint_save, checkpoint_restore,
// hold, idle and lost_work are the runtime's "off-duty time or preemption
// waste" (RG); a compiler or model change that shortens steps raises PG. A
// training hold (Ads paper VI.A) costs chip-time only while the job still
// holds chips; once they are released it costs nothing here and the freed
// chips show up as unallocated (or as another job's time). A preemption
// notice (Ads paper VI.B) lets the job commit a checkpoint first, which turns
// what would have been lost_work into productive.
//
// # Output
//
// Report has the fleet, the fleet per phase, and every job in total and per
// phase. WriteText prints two aligned tables (ratios, chip-seconds), with "*"
// for an aggregate job or phase; WriteJSON writes snake_case fields;
// RegisterMetrics exports sig_trainer_goodput_ratio{training_job,phase,kind},
// sig_trainer_goodput_chip_seconds{training_job,phase,category} and
// sig_trainer_goodput_capacity_chip_seconds on a caller's registry.
//
// # Restarts
//
// A job outlives its controller process; its goodput must too (MPG paper
// §4: RG counts the work a failure loses and the time until the job runs
// again). Recorder.History returns one job's records up to a time, with its
// allocation then, as a History whose JSON (absolute times, categories and
// event kinds by name) the trainer persists with each checkpoint.
// Recorder.Restore makes a History the beginning of the job's timeline in a
// new recorder: it validates it, extends the recorder's window back to the
// history's start, and reopens the allocation the job had at its end; the
// caller then records what followed (the trainer: a Failure at the end, so
// the steps since the last checkpoint are lost_work, and the downtime as
// idle on that allocation; see the trainer package). Restore is still pure:
// the caller reads and writes the bytes. testdata/restart.txt is a crash and
// restart worked by hand.
//
// # Text form
//
// ParseTimeline and FormatTimeline read and write a Timeline as text, one
// record a line (see ParseTimeline). The test cases in testdata/ use it, and
// the trainer can dump a run's timeline to recompute or explain its goodput.
//
// What the package does not own: the clock and I/O (callers give every
// time and read and write the bytes), what the chips are doing (a real
// job's trainer/control classifies it and package trainer records it; the
// fleet simulation records its own jobs), the scheduler
// (trainer/accounting/fleet), and what a step ideally costs (trainer/steptime).
package goodput
