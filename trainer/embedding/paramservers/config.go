package paramservers

import (
	"errors"
	"fmt"
	"time"
)

// Config configures a job's parameter servers (the trainer's
// ControllerConfig.ParameterServers).
type Config struct {
	// Servers is how many `trainer ps` processes the controller starts, one
	// shard each; 0 with Addrs empty keeps the tables on the slice.
	Servers int
	// Addrs are servers already running (shard i at Addrs[i]); the
	// controller starts none then, and a dead one is its operator's to
	// restart.
	Addrs []string
	// Command runs `trainer ps`: the program and the arguments before the
	// server's flags. Default: this process's executable and "ps" (the
	// trainer binary runs them).
	Command []string
	// StoreArgs are the servers' checkpoint flags: --data DIR, or the
	// warehouse's --s3-* flags and --pipeline (`trainer ps`). Required
	// with Servers: a server that restarts without its checkpoints would
	// lose the tables.
	StoreArgs []string
	// Env is added to the servers' environment (e.g. SIG_S3_SECRET_KEY:
	// secrets stay off their command lines).
	Env []string
	// Client is the SIG client the job trains for. Servers the job starts
	// admit one token, a secret the job makes for them (Start), and a token
	// of role trainer names its client.
	Client string
	// Token is the bearer token (role trainer or operator) the job sends
	// servers run by hand (Addrs), whose --tokens file must admit it; the
	// controller sets it to the job's trainer token
	// (ControllerConfig.Token). Servers the job starts get the job's own
	// secret instead, and Token is not sent to them.
	Token string
	// NoStacking keeps every table its own variable; by default tables of
	// one width and optimizer are stacked (paper V.B), rows distributed
	// cyclically over the servers.
	NoStacking bool
	// RestartDelay is the pause before a dead server is started again.
	// Default 100ms.
	RestartDelay time.Duration
}

// Enabled reports whether the tables go to parameter servers.
func (p Config) Enabled() bool { return p.Servers > 0 || len(p.Addrs) > 0 }

// Validate checks the configuration, naming what is wrong.
func (p Config) Validate() error {
	switch {
	case p.Servers < 0 || p.Servers > 64:
		return fmt.Errorf("parameter servers: %d, want 0 to 64", p.Servers)
	case len(p.Addrs) > 0 && p.Servers > 0 && p.Servers != len(p.Addrs):
		return fmt.Errorf("parameter servers: %d servers but %d addresses", p.Servers, len(p.Addrs))
	case p.Servers > 0 && len(p.Addrs) == 0 && len(p.StoreArgs) == 0:
		return errors.New("parameter servers: no checkpoint store for them (StoreArgs: --data DIR or the --s3-* flags and --pipeline)")
	case p.Servers > 0 && len(p.Addrs) == 0 && p.Client == "":
		return errors.New("parameter servers: no client to name in the token the job gives them")
	case len(p.Addrs) > 0 && p.Token == "":
		// Every parameter server authenticates its callers (`trainer ps`
		// refuses to start without --tokens): without a token the job's
		// calls would all be refused.
		return errors.New("parameter servers at given addresses: no token to call them with (the job's trainer token, which their --tokens file must admit)")
	}
	return nil
}
