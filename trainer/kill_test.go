package trainer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
)

// TestExactlyOnceUnderKills runs a pipeline as real processes — two
// readers, a controller and two hosts — and SIGKILLs readers, hosts and the
// controller at random moments (several seeds), restarting each after a
// short pause. Whatever is killed when, the last committed checkpoint's
// ledger must hold every event of the range exactly once, each trained as
// part of its own block (paper III.C: a failed epoch writes no checkpoint
// and is retrained from the last one). Seed 3 runs its caught-up phase on
// parameter servers.
func TestExactlyOnceUnderKills(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	// KILL_SEED=n runs one seed (debugging; TRAINER_TEST_LOG=1 shows the
	// processes' logs).
	if s := os.Getenv("KILL_SEED"); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		seeds = []uint64{n}
	}
	kills := 5
	if testing.Short() {
		seeds, kills = seeds[:1], 3
	}
	t0 := time.Now()
	e := newEnv(t, 6, 2000, sigd.Options{})
	e.memoize(t, "warm")
	t.Logf("environment up in %v", time.Since(t0).Round(time.Millisecond))
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			pipeline := fmt.Sprintf("kill%d", seed)
			// Steps of ~20ms make an epoch last long enough to be cut.
			t1 := time.Now()
			// Seed 3's caught-up phase keeps its tables on two parameter
			// servers the controller starts: a killed controller takes them
			// with it, and its successor's restarted servers are rolled back
			// to the committed step.
			var extra []string
			if seed == 3 {
				// A network as fast as HBM keeps its steps on the servers
				// as short as the slice's (the default prices the wait
				// at 100 Gbit/s: about 1.8 s a step at the default time
				// scale).
				extra = []string{"--ps-servers", "2", "--ps-bandwidth", "1.2e12"}
			}
			pp := startPipeline(t, e, pipeline, 2, 2, extra...)
			t.Logf("processes started in %v", time.Since(t1).Round(time.Millisecond))
			defer func() { t.Logf("seed done in %v", time.Since(t1).Round(time.Millisecond)) }()
			r := rand.New(rand.NewPCG(seed, 7))
			all := append(append([]*proc{pp.controller}, pp.readers...), pp.hosts...)
			deadline := time.Now().Add(60 * time.Second)
			done := false
			var killed []string
			for k := 0; k < kills && !done; k++ {
				// Kill something at a random moment of an epoch attempt.
				if !pp.waitTraining(20 * time.Second) {
					break
				}
				if exited, _ := pp.controller.wait(time.Duration(r.IntN(400)) * time.Millisecond); exited {
					done = true
					break
				}
				victim := all[r.IntN(len(all))]
				victim.kill()
				killed = append(killed, victim.name)
				time.Sleep(time.Duration(50+r.IntN(400)) * time.Millisecond)
				victim.start()
			}
			t.Logf("killed %v", killed)
			for !done {
				exited, err := pp.controller.wait(time.Until(deadline))
				if !exited {
					t.Fatal("the pipeline did not finish within 60s")
				}
				if err != nil {
					t.Fatalf("controller exited with %v", err)
				}
				done = true
			}
			rep := pp.report(t)
			if rep.Exit != "done" {
				t.Fatalf("controller exit %q", rep.Exit)
			}
			m := checkExactlyOnce(t, e, pipeline)
			if seed == 3 {
				p := rep.ParameterServers
				if p == nil || p.Servers != 2 {
					t.Fatalf("seed 3 ran without its parameter servers: %+v", p)
				}
				t.Logf("parameter servers (last controller): %d restarts, %d moves, %d rollbacks, %d steps, committed step %d",
					p.Restarts, p.Moves, p.Restores, p.Steps, p.CommittedStep)
			}
			clog := pp.controller.log.String()
			t.Logf("controller runs %d, resumed from a checkpoint %d times, failed attempts %d, reader retries seen by hosts %d",
				pp.controller.runs, strings.Count(clog, "resuming from checkpoint"), strings.Count(clog, "epoch attempt failed"),
				strings.Count(pp.hosts[0].log.String()+pp.hosts[1].log.String(), "controller session ended"))
			t.Logf("committed %d epochs, %d units, %d events; the last controller ran %d attempts (%d failed)",
				m.Epochs, len(m.Units), m.EventIDs, rep.Stats.Attempts, rep.Stats.FailedAttempts)
		})
	}
}
