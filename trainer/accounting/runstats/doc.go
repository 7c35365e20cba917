// Package runstats sums what the steps of one controller process did, for
// the run's report, its status and its metrics: per training phase (Ads
// paper III.A) the steps, examples and losses (the mean of the first and
// last 20, and a loss curve thinned as it grows), the feature values
// looked up and unique rows gathered per step (V.A), the bytes each
// SparseCore moved (for the phase's Eq. 1 load imbalance), and the
// modelled TensorCore, SparseCore, parameter-server wait and device time
// of a step; over the
// whole run, the same step times weighted by the chips each step ran on,
// as program goodput weighs them (MPG paper §4: a step on 4 chips is 4
// times the chip-time of one on 1).
//
// Imports run one way: runstats imports nothing of the trainer. The job
// runtime (package trainer) measures each step (its device's step-time
// model, trainer/steptime, gives the modelled times) and hands it to
// Observe; it computes the load imbalance with the embedding wing's Eq. 1
// (Phases takes the function).
//
// What the package does not own: what a step costs (trainer/steptime),
// goodput (trainer/accounting/goodput: the chip-time classification;
// runstats only sums what the steps measured), the report's other parts.
package runstats
