// Package trainers keeps what training jobs report to sigd about
// themselves (ReportTrainerStatus): each job's latest status — phase,
// hold, goodput (MPG paper), chip-seconds by category — so that operators
// see the jobs beside the queues they wait on (the web UI's overview and
// trainer pages, sig_trainer_reported_goodput_ratio).
//
// A Registry checks and cleans every report (Clean: names as names, text
// printable and clipped, numbers finite and non-negative), bounds how many
// jobs a client and the whole service may report (each is kept in memory,
// exported as metrics and drawn), and forgets jobs silent for a day. It
// holds no state beyond memory: a restarted sigd shows each job again at
// its next report, a few seconds later.
//
// It does not own who may report for which client (sigd's RPC checks the
// caller's role and client) nor the metrics (sigd's, through hooks).
package trainers
