package trainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	psv1 "github.com/sigdata/sig/proto/ps/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
)

// TestCaughtUpOnParameterServers trains one pipeline three times over the
// same blocks, with a real sigd, MinIO and in-process readers: with the
// tables on the slice throughout (the reference); with them moved at the
// switch to the caught-up phase onto two `trainer ps` processes the
// controller starts (checkpoints in MinIO, gRPC over loopback sockets);
// and the same with one server SIGKILLed in the middle of the last
// caught-up epoch. Each job has one host reading one unit at a time, so the
// three see the same batches in the same order.
//
//   - At the switch, every row the servers hold reads back equal, bit for
//     bit, to the model state the caught-up phase starts from.
//   - With the tables on the servers, every step's loss and the final
//     parameters (the tables read back from the servers) equal the
//     reference's bit for bit: the servers' SGD is the slice's float32
//     arithmetic (trainer/model).
//   - Killed mid-epoch, the attempt fails, the epoch is retrained from the
//     last checkpoint with every server rolled back to its committed step
//     (the dead one restarted from its own newest checkpoint), and the
//     final parameters still equal the reference's: no update lost (it
//     would be missing from them), none applied twice (it would be counted
//     twice in them); the servers' committed step is the reference's step
//     count, and every event is in the ledger once.
func TestCaughtUpOnParameterServers(t *testing.T) {
	e := newEnv(t, 6, 2500, sigd.Options{})
	// Every block memoized before the jobs start: their initial epochs
	// are not cut short by a block still pending (the same units per epoch
	// in every run).
	e.memoize(t, "warm")
	trainerBin := sigdtest.BuildCommand(t, "cmd/trainer")
	mio := e.w.MinIO
	jobCfg := func(pipeline string, servers int) JobConfig {
		cfg := e.jobConfig(t, pipeline)
		cfg.Hosts = 1
		cfg.HostInFlight = buffer.Scaling{Min: 1, Max: 1}
		// A network as fast as HBM keeps the steps on the servers about
		// as long as the slice's (the default's 100 Gbit/s makes them 1.8
		// s each at the default time scale); bench/placement.sh measures
		// the default. The same in all three runs: the same job.
		cfg.Device.Network.Bandwidth = steptime.DefaultHBMBandwidth
		if servers > 0 {
			cfg.ParameterServers = paramservers.Config{Servers: servers, Command: []string{trainerBin, "ps"},
				StoreArgs: []string{"--s3-endpoint", mio.Endpoint, "--s3-bucket", sigdtest.Bucket, "--pipeline", pipeline},
				Env:       []string{"SIG_S3_ACCESS_KEY=" + mio.AccessKey, "SIG_S3_SECRET_KEY=" + mio.SecretKey}}
		}
		return cfg
	}
	run := func(cfg JobConfig) Report {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		rep, err := RunJob(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if testing.Verbose() {
			_ = rep.WriteText(os.Stdout)
		}
		if rep.Exit != "done" || rep.Units != 6 || len(rep.Phases) != 2 || rep.Phases[1].Phase != "caught-up" {
			t.Fatalf("%s: exit %s with %d units, phases %+v", cfg.Pipeline, rep.Exit, rep.Units, rep.Phases)
		}
		return rep
	}

	ref := run(jobCfg("slice", 0))
	refState, refMan := finalState(t, e, "slice")
	if ref.ParameterServers != nil || refMan.ParameterServers != nil {
		t.Fatal("a job without parameter servers reports some")
	}

	// The tables move onto the servers at the switch.
	cfg := jobCfg("onps", 2)
	var switched [][]float32
	cfg.OnController = func(c *Controller, _ string) {
		c.psPlaced = func(ctx context.Context, client *ps.Client, m *model.Model) {
			got, err := client.ReadTables(ctx)
			if err != nil {
				t.Errorf("reading the tables back: %v", err)
				return
			}
			want := m.TableValues()
			if err := sameTables(got, want); err != nil {
				t.Errorf("the servers' tables differ from the model state at the switch: %v", err)
			}
			switched = got
			checkServersAuthenticate(ctx, t, c.dev.ps)
		}
	}
	rep := run(cfg)
	if switched == nil {
		t.Fatal("the tables were never placed on the servers")
	}
	p := rep.ParameterServers
	if p == nil || p.Servers != 2 || p.Moves != 1 || p.Steps != int(rep.Phases[1].Steps) || p.Checkpoints != 2 {
		t.Fatalf("parameter servers: %+v (caught-up steps %d)", p, rep.Phases[1].Steps)
	}
	checkExactlyOnce(t, e, "onps")
	state, man := finalState(t, e, "onps")
	checkSameRun(t, "tables on parameter servers", ref, rep, refState, state)
	if man.ParameterServers == nil || man.ParameterServers.Step != p.CommittedStep || uint64(p.CommittedStep) != modelSteps(t, refState) {
		t.Fatalf("manifest %+v, committed step %d, the reference trained %d steps", man.ParameterServers, p.CommittedStep, modelSteps(t, refState))
	}
	if p.RPCSeconds <= 0 || p.SaveSeconds <= 0 || p.MoveSeconds <= 0 {
		t.Fatalf("parameter server time not accounted: %+v", p)
	}
	// Program goodput on one basis (issue 27; TestProgramGoodputOneBasis
	// holds the denominators): the caught-up phase's ideal chip-time — PG's
	// numerator, the committed steps' FLOPs at peak — is the reference's,
	// for the same steps; the modelled steps differ only in where the
	// lookups went, the SparseCore's time replaced by the wait on the
	// servers, which is in their device time (PG's denominator).
	refCU, cuPG := phaseGoodput(ref, "caught-up"), phaseGoodput(rep, "caught-up")
	if math.Abs(refCU.IdealChipSeconds-cuPG.IdealChipSeconds) > 1e-9*refCU.IdealChipSeconds || refCU.IdealChipSeconds <= 0 {
		t.Errorf("caught-up ideal chip-seconds %v on the servers, %v on the slice: the same steps' ideal moved with the tables",
			cuPG.IdealChipSeconds, refCU.IdealChipSeconds)
	}
	rs, ss := ref.Phases[1], rep.Phases[1]
	if rs.ServersNSPerStep != 0 || ss.SparseCoreNSPerStep != 0 || ss.ServersNSPerStep <= 0 || rs.TensorCoreNSPerStep != ss.TensorCoreNSPerStep ||
		math.Abs(ss.DeviceNSPerStep-(ss.TensorCoreNSPerStep+ss.ServersNSPerStep)) > 1 {
		t.Errorf("caught-up steps: on the slice %+v, on the servers %+v", rs, ss)
	}
	// Where that time is in goodput (doc.go): step RPCs in productive time,
	// reading back and checkpointing the servers in checkpoint_save, moving
	// the tables on in checkpoint_restore — all in the caught-up phase, on
	// its one chip.
	cu := phaseGoodput(rep, "caught-up").ChipSeconds
	if cu[goodput.Productive] < p.RPCSeconds || cu[goodput.CheckpointSave] < p.SaveSeconds || cu[goodput.CheckpointRestore] < p.MoveSeconds {
		t.Fatalf("caught-up goodput %v does not hold the servers' time %+v", cu, p)
	}
	t.Logf("on the servers: %d caught-up steps, %.3f s in step RPCs, %d RPCs; caught-up PG %.4f, on the slice %.4f; "+
		"the step-time model's ratio (TensorCore + SparseCore) / (TensorCore + wait on the servers) = (%.3g + %.3g) / (%.3g + %.3g) = %.3f, measured %.3f",
		p.Steps, p.RPCSeconds, p.RPCs, cuPG.PG, refCU.PG, rs.TensorCoreNSPerStep, rs.SparseCoreNSPerStep, ss.TensorCoreNSPerStep, ss.ServersNSPerStep,
		rs.DeviceNSPerStep/ss.DeviceNSPerStep, cuPG.PG/refCU.PG)

	// One server SIGKILLed mid-epoch: in the last caught-up epoch (the two
	// have the same steps, their blocks the same rows), after the step's
	// lookup and before its Apply, so that the other server applies the
	// step and the killed one does not — an update only a rollback undoes.
	killAt := int64(ref.Phases[0].Steps + ref.Phases[1].Steps/2 + 3)
	cfg = jobCfg("killps", 2)
	var once sync.Once
	killed := make(chan string, 1)
	cfg.OnController = func(c *Controller, _ string) {
		c.psBeforeApply = func(step int64) {
			if step != killAt {
				return
			}
			once.Do(func() {
				pid := c.dev.ps.PID(1) // the hook runs under the device's mutex
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					killed <- err.Error()
					return
				}
				// Until the supervisor has reaped it: the Apply then finds it dead.
				for end := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
				}
				killed <- fmt.Sprintf("killed shard 1 (pid %d) before the Apply of step %d", pid, step)
			})
		}
	}
	krep := run(cfg)
	select {
	case m := <-killed:
		t.Log(m)
	default:
		t.Fatalf("step %d never ran on the servers", killAt)
	}
	kp := krep.ParameterServers
	if kp == nil || kp.Restarts < 1 || kp.Restores < 1 || krep.Stats.FailedAttempts < 1 {
		t.Fatalf("the kill was not retrained: %d failed attempts, parameter servers %+v", krep.Stats.FailedAttempts, kp)
	}
	checkExactlyOnce(t, e, "killps")
	kstate, kman := finalState(t, e, "killps")
	if !bytes.Equal(kstate, refState) {
		t.Fatal("after the kill, the final parameters differ from the reference's: an update was lost or applied twice")
	}
	if kman.ParameterServers == nil || uint64(kman.ParameterServers.Step) != modelSteps(t, refState) {
		t.Fatalf("committed server step %+v, the reference trained %d steps", kman.ParameterServers, modelSteps(t, refState))
	}
	// The aborted attempt's steps are lost work of the caught-up phase.
	if lw := phaseGoodput(krep, "caught-up").ChipSeconds[goodput.LostWork]; lw <= 0 {
		t.Errorf("the killed attempt's steps are not lost work: %v", lw)
	}
	t.Logf("killed run: %d failed attempts, %d server restarts, %d moves, %d rollbacks", krep.Stats.FailedAttempts, kp.Restarts, kp.Moves, kp.Restores)
}

// checkServersAuthenticate: the servers a job started authenticate their
// callers (issue 27: they ran unauthenticated): each was started with a
// token file (--tokens FILE), which is gone once it listens, no secret is
// on its command line, and a call without a token or with another one is
// refused as Unauthenticated (the job's own calls are served: the run
// trains). Linux only (/proc).
func checkServersAuthenticate(ctx context.Context, t *testing.T, st *paramservers.Servers) {
	t.Helper()
	secret := regexp.MustCompile(`^[0-9a-f]{32,}$`) // randid.Hex
	for i, addr := range st.Addrs() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID(i)))
		if err != nil {
			t.Errorf("server %d: %v", i, err)
			return
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		k := slices.Index(argv, "--tokens")
		if k < 0 || k+1 >= len(argv) {
			t.Errorf("server %d runs without a token file: %q", i, argv)
			return
		}
		if _, err := os.Stat(argv[k+1]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("server %d listens and its token file %s is still there (%v)", i, argv[k+1], err)
		}
		if j := slices.IndexFunc(argv, secret.MatchString); j >= 0 {
			t.Errorf("server %d has a secret on its command line: %q", i, argv[j])
		}
		for _, token := range []string{"", strings.Repeat("0", 64)} {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if token != "" {
				opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: true}))
			}
			cc, err := grpc.NewClient(addr, opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = psv1.NewParameterServerClient(cc).Status(ctx, &psv1.StatusRequest{})
			cc.Close()
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("server %d called with token %q: %v, want Unauthenticated", i, token, err)
			}
		}
	}
}

// TestParameterServersConfig: a bad parameter-server configuration is an
// error naming what is wrong, before anything starts.
func TestParameterServersConfig(t *testing.T) {
	for _, tc := range []struct {
		ps   paramservers.Config
		want string
	}{
		{paramservers.Config{Servers: -1}, "parameter servers: -1"},
		{paramservers.Config{Servers: 2}, "no checkpoint store"},
		{paramservers.Config{Servers: 2, Addrs: []string{"127.0.0.1:1"}}, "2 servers but 1 addresses"},
		// Servers run by hand are called with the job's token: none, none
		// of their calls would be served.
		{paramservers.Config{Addrs: []string{"127.0.0.1:1"}}, "no token to call them with"},
	} {
		_, err := NewController(ControllerConfig{Client: "c", Pipeline: "p", SigdAddr: "127.0.0.1:1", ParameterServers: tc.ps})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.ps, err, tc.want)
		}
	}
}

// finalState returns the model object and manifest of the pipeline's last
// committed checkpoint.
func finalState(t *testing.T, e *env, pipeline string) ([]byte, *checkpoint.Manifest) {
	t.Helper()
	cs, err := checkpoint.NewStore(e.w.Store, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := cs.Latest(ctx)
	if err != nil || m == nil {
		t.Fatalf("%s: no committed checkpoint: %v", pipeline, err)
	}
	b, _, err := cs.Load(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

// modelSteps reads the step count of a model state (trainer/model's
// MarshalBinary: magic, 8-hex-digit fingerprint, steps).
func modelSteps(t *testing.T, state []byte) uint64 {
	t.Helper()
	const head = len("SIGMODEL1\n") + 8
	if len(state) < head+8 {
		t.Fatal("short model state")
	}
	var n uint64
	for i := 7; i >= 0; i-- {
		n = n<<8 | uint64(state[head+i])
	}
	return n
}

// checkSameRun requires two runs' losses, step by step, and final
// parameters to be the same bits.
func checkSameRun(t *testing.T, what string, ref, got Report, refState, state []byte) {
	t.Helper()
	if len(ref.LossCurve) != len(got.LossCurve) {
		t.Fatalf("%s: %d steps, the reference %d", what, len(got.LossCurve), len(ref.LossCurve))
	}
	for i, p := range got.LossCurve {
		if math.Float64bits(p.Loss) != math.Float64bits(ref.LossCurve[i].Loss) || p.Phase != ref.LossCurve[i].Phase {
			t.Fatalf("%s: step %d (%s) loss %v, the reference %v (%s)", what, p.Step, p.Phase, p.Loss, ref.LossCurve[i].Loss, ref.LossCurve[i].Phase)
		}
	}
	if !bytes.Equal(state, refState) {
		t.Fatalf("%s: the final parameters differ from the reference's", what)
	}
}

func sameTables(a, b [][]float32) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d tables vs %d", len(a), len(b))
	}
	for t := range a {
		if len(a[t]) != len(b[t]) {
			return fmt.Errorf("table %d: %d floats vs %d", t, len(a[t]), len(b[t]))
		}
		for i := range a[t] {
			if math.Float32bits(a[t][i]) != math.Float32bits(b[t][i]) {
				return fmt.Errorf("table %d float %d: %v vs %v", t, i, a[t][i], b[t][i])
			}
		}
	}
	return nil
}

// phaseGoodput is the job's goodput in one phase.
func phaseGoodput(r Report, phase string) goodput.Summary {
	for _, j := range r.Goodput.Jobs {
		if j.Job != r.Job {
			continue
		}
		for _, p := range j.Phases {
			if p.Phase == phase {
				return p
			}
		}
	}
	return goodput.Summary{}
}
