// Package cli holds what the project's commands (sigctl, sigd, reader,
// trainer) share, so that none writes it again: the subcommand dispatcher
// and its exit statuses (Commands), flags that also read SIG_* environment
// variables (the one config loader: ApplyEnv, ParseEnv), the connection
// to a server of the project (ConnFlags, Dial), --log-level (LogFlag) and
// --range FROM:TO (ParseTimeRange). It is a leaf: it imports no package of
// the project outside internal/.
//
// What it does not own: what a command does (cmd/*), and the object-store
// flags (objstore.Flags, which the commands that reach the warehouse add).
package cli
