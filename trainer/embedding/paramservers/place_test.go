package paramservers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
)

// startInProcessServers starts n parameter servers in the test process on
// loopback gRPC, each with its own checkpoint directory (unit level: the
// job-level tests run `trainer ps` processes).
func startInProcessServers(t *testing.T, n int) *Servers {
	t.Helper()
	st := &Servers{log: slog.New(slog.DiscardHandler), now: time.Now}
	dir := t.TempDir()
	for i := range n {
		s, err := ps.NewServer(context.Background(), ps.Config{Shard: i, Shards: n, Store: ps.DirStore{Dir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := ps.NewGRPCServer(s, nil)
		go g.Serve(lis)
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close(); g.Stop() })
		st.conns = append(st.conns, cc)
		st.cfg.Addrs = append(st.cfg.Addrs, lis.Addr().String())
	}
	return st
}

// testModel is a small model of one sparse and one dense input, and a batch
// of two examples for it.
func testModel(t *testing.T) (*model.Model, *model.Examples) {
	t.Helper()
	f, err := model.NewFeatures([]model.Input{{Name: "ad", Type: transform.Int64}, {Name: "price", Type: transform.Float64}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(model.Config{Features: f})
	if err != nil {
		t.Fatal(err)
	}
	ex := model.NewExamples(f)
	ex.EventIDs, ex.Labels = []int64{1, 2}, []float32{1, 0}
	ex.Sparse[0] = model.SparseColumn{Offsets: []int32{0, 1, 2}, IDs: []uint64{3, 4}}
	ex.Dense[0] = []float32{0.5, -0.5}
	return m, ex
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

// TestPlaceTablesRollsBackOrRewrites drives the device's parameter-server
// operations by hand: the tables move onto the servers at the switch, a
// step trains there, a checkpoint reads them back and commits the servers'
// step; a restore of that checkpoint rolls servers that went on past it
// back (ps Restore), and servers that lost it (new, empty stores) get the
// tables written from the checkpoint's model state (ps Assign). Both end
// with the checkpoint's tables, bit for bit.
func TestPlaceTablesRollsBackOrRewrites(t *testing.T) {
	ctx := context.Background()
	m, batch := testModel(t)
	st := startInProcessServers(t, 2)
	if err := st.Place(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if st.rep.Moves != 1 || st.client.Step() != int64(m.Steps()) {
		t.Fatalf("moved %d times, servers at step %d, model at %d", st.rep.Moves, st.client.Step(), m.Steps())
	}
	step := func() {
		t.Helper()
		if _, err := m.StepRemote(ctx, batch, st.Remote()); err != nil {
			t.Fatal(err)
		}
	}
	step()
	pss, err := st.Save(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if pss.Step != 1 || pss.Servers != 2 {
		t.Fatalf("committed %+v", pss)
	}
	state, err := m.MarshalBinary() // with the tables read back
	if err != nil {
		t.Fatal(err)
	}
	want := m.TableValues()
	man := &checkpoint.Manifest{ParameterServers: pss}
	restored := func() *model.Model {
		t.Helper()
		r, err := model.New(m.Config())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.UnmarshalBinary(state); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// A step past the checkpoint, then the attempt fails: roll back.
	step()
	if err := st.Place(ctx, restored(), man.ParameterServers); err != nil {
		t.Fatal(err)
	}
	got, err := st.client.ReadTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameTables(got, want); err != nil || st.rep.Restores != 1 || st.client.Step() != 1 {
		t.Fatalf("after the rollback (%d rollbacks, step %d): %v", st.rep.Restores, st.client.Step(), err)
	}

	// Servers that never saw the checkpoint: the tables from the model state.
	fresh := startInProcessServers(t, 2)
	if err := fresh.Place(ctx, restored(), man.ParameterServers); err != nil {
		t.Fatal(err)
	}
	if got, err = fresh.client.ReadTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sameTables(got, want); err != nil || fresh.rep.Moves != 1 || fresh.client.Step() != 1 {
		t.Fatalf("written from the model state (%d moves, step %d): %v", fresh.rep.Moves, fresh.client.Step(), err)
	}
	// A checkpoint whose servers' step is not its model's is refused.
	bad := &checkpoint.Manifest{ParameterServers: &checkpoint.ParameterServers{Servers: 2, Stacking: true, Step: 7}}
	if err := fresh.Place(ctx, restored(), bad.ParameterServers); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("a manifest whose servers' step is not its model's: %v, want ErrCorrupt (a permanent hold)", err)
	}
}

// TestServersCallWithTheJobToken: servers run by hand (Config.Addrs)
// authenticate their callers; the job's calls carry Config.Token, so the
// tables are placed with the token the servers admit and refused
// (Unauthenticated) with another.
func TestServersCallWithTheJobToken(t *testing.T) {
	const token = "the-jobs-trainer-token"
	toks, err := auth.New([]auth.Entry{{Token: token, Principal: auth.Principal{Role: auth.RoleTrainer, Client: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ps.NewServer(context.Background(), ps.Config{Shard: 0, Shards: 1, Store: ps.DirStore{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := ps.NewGRPCServer(s, toks)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	m, _ := testModel(t)
	for _, tc := range []struct {
		token string
		want  codes.Code
	}{{token + "-not", codes.Unauthenticated}, {token, codes.OK}} {
		cfg := Config{Addrs: []string{lis.Addr().String()}, Token: tc.token}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		st, err := Start(context.Background(), cfg, time.Now, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Place(context.Background(), m, nil); status.Code(err) != tc.want {
			t.Errorf("placing with token %q: %v, want %v", tc.token, err, tc.want)
		}
		st.Close()
	}
	if err := (Config{Addrs: []string{lis.Addr().String()}}).Validate(); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("servers at given addresses without a token: %v", err)
	}
}

// TestJobTokenFile: the token file a job writes for a server's start is
// its user's alone (file 0600 in a directory 0700), admits the job's
// secret as role trainer for its client and nothing else, and is gone once
// removed.
func TestJobTokenFile(t *testing.T) {
	tok := newJobToken("ctr")
	path, remove, err := tok.writeFile()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, mode %v", path, err, fi.Mode())
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("token directory: %v, mode %v", err, di.Mode())
	}
	toks, err := auth.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := toks.Lookup(tok.secret); !ok || p.Role != auth.RoleTrainer || p.Client != "ctr" {
		t.Fatalf("the job's secret: %+v %v", p, ok)
	}
	if other := newJobToken("ctr"); other.secret == tok.secret || len(tok.secret) != 64 {
		t.Fatalf("secrets %q and %q", tok.secret, other.secret)
	}
	remove()
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the token's directory after removal: %v", err)
	}
}
