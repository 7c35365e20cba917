package workers

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestBannedBuildRemote (issue 27): remote workers say their build when
// they lease; the completion hook learns the build from the lease (what
// sigd records with the memo entry), not from the worker's completion. A
// banned build is refused with FailedPrecondition across the wire
// (ErrBanned at the worker, which keeps asking quietly), another build
// leases what is queued, the ban survives a reopen of the queue, and
// once it is lifted the build leases again.
func TestBannedBuildRemote(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	q := openTest(t, dir, clk)
	var mu sync.Mutex
	builds := map[TaskID]string{}
	client := serveWorkers(t, q, describeFake, WithCompleteHook(func(_ context.Context, tk Task, res Result) error {
		mu.Lock()
		builds[tk.ID] = res.Build
		mu.Unlock()
		return nil
	}))
	ok := RunnerFunc(func(context.Context, Task) (Result, error) { return Result{Rows: 1}, nil })
	if _, err := q.Enqueue(req("k0", "b0", "ads", "p", 1)); err != nil {
		t.Fatal(err)
	}
	bad := NewPool(NewRemoteLeaser(client, time.Hour, "v1 misbuilt"), ok, PoolOptions{Clock: clk, Name: "bad"})
	bad.Resize(1)
	waitFor(t, "the bad build's task", func() bool { return q.Backlog() == 0 })
	if err := bad.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if got := builds[TaskID{nameKey("k0"), blockref.ParseMemo("b0")}]; got != "v1 misbuilt" {
		t.Errorf("the completion hook saw build %q, want the lease's", got)
	}
	mu.Unlock()

	if added, revoked, err := q.BanBuild("v1 misbuilt", "memo k0/b0 holds wrong values"); err != nil || !added || revoked != 0 {
		t.Fatalf("BanBuild: %v %v %v", added, revoked, err)
	}
	if _, _, err := q.BanBuild("", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("banning the empty build: %v, want ErrInvalid", err)
	}
	if _, err := q.Enqueue(req("k1", "b0", "ads", "p", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := client.LeaseTask(context.Background(), &sigv1.LeaseTaskRequest{WorkerId: "w", Build: "v1 misbuilt"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "memo k0/b0 holds wrong values") {
		t.Fatalf("a banned build's lease: %v, want FailedPrecondition with the ban's reason", err)
	}
	rl := NewRemoteLeaser(client, time.Second, "v1 misbuilt")
	if _, err := rl.Lease(context.Background(), "w"); !errors.Is(err, ErrBanned) {
		t.Errorf("RemoteLeaser of a banned build: %v, want ErrBanned", err)
	}
	if task, _ := q.Get(TaskID{nameKey("k1"), blockref.ParseMemo("b0")}); task.State != StateQueued {
		t.Errorf("k1 after the refused leases: %v, want queued", task.State)
	}

	// Across a reopen: still banned.
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openTest(t, dir, clk)
	defer q.Close()
	if b, ok := q.Banned("v1 misbuilt"); !ok || b.Reason != "memo k0/b0 holds wrong values" || !b.Since.Equal(t0) {
		t.Fatalf("after reopening: %+v %v, want the ban", b, ok)
	}
	if _, _, err := q.TryLeaseAs("w", "v1 misbuilt"); !errors.Is(err, ErrBanned) {
		t.Errorf("after reopening, the banned build leases: %v", err)
	}
	l, leased, err := q.TryLeaseAs("w2", "v2")
	if err != nil || !leased || l.Build != "v2" {
		t.Fatalf("another build: %+v %v %v", l, leased, err)
	}
	if err := q.Return(l.ID); err != nil {
		t.Fatal(err)
	}
	if lifted, err := q.LiftBan("v1 misbuilt"); err != nil || !lifted {
		t.Fatalf("LiftBan: %v %v", lifted, err)
	}
	if len(q.Bans()) != 0 {
		t.Errorf("bans after lifting: %v", q.Bans())
	}
	// In process, a Leaser of the build (ForBuild) records it too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ls, err := q.ForBuild("v1 misbuilt").LeaseBatch(ctx, "w", 1); err != nil || len(ls) != 1 || ls[0].Build != "v1 misbuilt" {
		t.Errorf("after the lift: %+v %v, want a lease of build v1 misbuilt", ls, err)
	}
}

// TestBuildID: the build a worker says it runs names the Go version, the
// target and the executable's hash, is the same at every call, and is a
// name the queue accepts.
func TestBuildID(t *testing.T) {
	id := BuildID()
	for _, want := range []string{runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH, " exe:"} {
		if !strings.Contains(id, want) {
			t.Errorf("BuildID() = %q, want it to name %q", id, want)
		}
	}
	if strings.HasSuffix(id, "exe:unknown") {
		t.Errorf("BuildID() = %q: the executable was not hashed", id)
	}
	if BuildID() != id || checkName("build", id) != nil {
		t.Errorf("BuildID() = %q, then %q; checkName: %v", id, BuildID(), checkName("build", id))
	}
}
