package workers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
)

// serveWorkers starts the Workers service over q on a real socket on
// 127.0.0.1 and returns a client.
func serveWorkers(t *testing.T, q *Queue, describe func(TaskID) (*sigv1.Task, error), opts ...ServerOption) sigv1.WorkersClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sigv1.RegisterWorkersServer(srv, NewWorkersServer(q, describe, opts...))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sigv1.NewWorkersClient(conn)
}

func describeFake(id TaskID) (*sigv1.Task, error) {
	if keyName(id.Component) == "ghost" {
		return nil, errors.New("component evicted")
	}
	return &sigv1.Task{
		CanonicalDsl: "input out = lower(col(\"query\"))",
		RawSource:    "ads",
		RawObject:    "raw/ads/" + id.Block.String() + ".arrow",
		MemoObject:   "memo/" + keyName(id.Component) + "/" + id.Block.String() + ".arrow",
		Columns:      []string{"query"},
	}, nil
}

// TestRemoteWorkers runs a pool of remote workers against sigd's lease
// protocol over gRPC: tasks arrive described, completions carry rows and
// bytes to the complete hook, a panicking task is quarantined across the
// wire, and an undescribable task is failed server-side without reaching a
// worker.
func TestRemoteWorkers(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	var mu sync.Mutex
	hooked := map[TaskID]Result{}
	client := serveWorkers(t, q, describeFake, WithCompleteHook(func(_ context.Context, tk Task, res Result) error {
		mu.Lock()
		hooked[tk.ID] = res
		mu.Unlock()
		return nil
	}))

	var seen sync.Map
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		seen.Store(tk.ID, tk.Spec)
		if keyName(tk.ID.Component) == "bad" {
			panic("kernel bug")
		}
		return Result{Rows: 10, Bytes: int64(len(tk.Spec.GetMemoObject()))}, nil
	})
	pool := NewPool(NewRemoteLeaser(client, time.Hour, ""), runner, PoolOptions{Clock: clk, Name: "remote"})
	pool.Resize(3)

	reqs := []Request{req("bad", "b0", "ads", "ctr", 7), req("ghost", "b0", "ads", "ctr", 7)}
	for i := 0; i < 20; i++ {
		reqs = append(reqs, req(fmt.Sprintf("k%d", i%4), fmt.Sprint(i), fmt.Sprintf("client%d", i%2), "p", 3))
	}
	if _, err := q.Enqueue(reqs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queue to drain", func() bool { return q.Backlog() == 0 })
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 20 {
		t.Errorf("complete hook ran for %d tasks, want 20", len(hooked))
	}
	for id, res := range hooked {
		if want := int64(len("memo/" + keyName(id.Component) + "/" + id.Block.String() + ".arrow")); res.Rows != 10 || res.Bytes != want {
			t.Errorf("%s: hook got %+v", id, res)
		}
	}
	v, ok := seen.Load(TaskID{nameKey("k1"), blockref.ParseMemo("1")})
	if !ok {
		t.Fatal("k1/1 never reached a worker")
	}
	spec := v.(*sigv1.Task)
	if spec.GetComponentKey() != nameKey("k1").String() || spec.GetBlockId() != "1" || spec.GetClient() != "client1" || spec.GetPriority() != 3 ||
		spec.GetMemoObject() != "memo/k1/1.arrow" || spec.GetCanonicalDsl() == "" {
		t.Errorf("task as the worker saw it: %v", spec)
	}
	if _, ok := seen.Load(TaskID{nameKey("ghost"), blockref.ParseMemo("b0")}); ok {
		t.Error("an undescribable task reached a worker")
	}
	qs := q.ListQuarantine()
	if len(qs) != 2 {
		t.Fatalf("quarantine: %+v", qs)
	}
	if keyName(qs[0].ID.Component) != "bad" || !strings.Contains(qs[0].Err, "kernel bug") || qs[0].Attempts != 3 {
		t.Errorf("bad: %+v", qs[0])
	}
	if keyName(qs[1].ID.Component) != "ghost" || !strings.Contains(qs[1].Err, "component evicted") {
		t.Errorf("ghost: %+v", qs[1])
	}
	if s := pool.Stats(); s.Panics != 3 || s.Completed != 20 {
		t.Errorf("pool stats %+v", s)
	}
}

// TestRemoteLeaseProtocol: the sentinel errors survive the wire, bad
// requests are refused, and a lease wait ends empty on the queue's clock.
func TestRemoteLeaseProtocol(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	client := serveWorkers(t, q, nil)
	rl := NewRemoteLeaser(client, time.Second, "")
	ctx := context.Background()

	if _, err := rl.Heartbeat(ctx, "nope"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("remote heartbeat of unknown lease: %v", err)
	}
	if err := rl.Complete(ctx, "nope", Result{}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("remote complete of unknown lease: %v", err)
	}
	if _, err := client.LeaseTask(ctx, &sigv1.LeaseTaskRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("LeaseTask without worker id: %v", err)
	}
	if _, err := client.CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: "x", Rows: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CompleteTask with negative rows: %v", err)
	}
	// The op costs a worker reports feed the insertion policy: bad ones are
	// refused naming the field, not kept.
	tooMany := map[string]int64{}
	for i := 0; i <= 256; i++ {
		tooMany[fmt.Sprintf("op%d", i)] = 1
	}
	for name, ops := range map[string]map[string]int64{
		"negative time": {"hash": -1},
		"empty class":   {"": 5},
		"long class":    {strings.Repeat("x", 65): 5},
		"too many":      tooMany,
	} {
		_, err := client.CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: "x", Rows: 10, OpNanos: ops})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "op_nanos") {
			t.Errorf("CompleteTask with %s op costs: %v", name, err)
		}
	}

	// No work: the call waits its full wait on the queue's clock, then
	// answers with no task.
	type answer struct {
		resp *sigv1.LeaseTaskResponse
		err  error
	}
	ans := make(chan answer, 1)
	go func() {
		r, err := client.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w", Wait: durationpb.New(5 * time.Second)})
		ans <- answer{r, err}
	}()
	var a answer
	waitFor(t, "the empty answer", func() bool {
		select {
		case a = <-ans:
			return true
		default:
			clk.Advance(time.Second)
			return false
		}
	})
	if a.err != nil || a.resp.GetTask() != nil || a.resp.GetLeaseId() != "" {
		t.Errorf("empty wait answered %v, %v", a.resp, a.err)
	}

	// Cancellation of a leased task reaches the remote holder.
	if _, err := q.Enqueue(req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	l, err := rl.Lease(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if l.Task.ID != (TaskID{nameKey("k"), blockref.ParseMemo("b")}) || !l.Deadline.Equal(clk.Now().Add(30*time.Second)) {
		t.Errorf("remote lease %+v", l)
	}
	if d, err := rl.Heartbeat(ctx, l.ID); err != nil || d.Before(l.Deadline) {
		t.Errorf("remote heartbeat: %v, %v", d, err)
	}
	q.Cancel(l.Task.ID)
	if _, err := rl.Heartbeat(ctx, l.ID); !errors.Is(err, ErrCancelled) {
		t.Errorf("heartbeat of a cancelled task: %v", err)
	}
	if _, err := rl.Fail(ctx, l.ID, "x"); !errors.Is(err, ErrCancelled) {
		t.Errorf("fail of a cancelled task: %v", err)
	}

	// A caller that gives up stops waiting.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := rl.Lease(cctx, "w"); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled remote lease: %v", err)
	}
}

// TestDescribeWrapper: in process, Describe gives the runner the same Spec
// a remote worker gets.
func TestDescribeWrapper(t *testing.T) {
	q := openTest(t, t.TempDir(), clock.NewFake(t0), func(o *Options) { o.MaxAttempts = 1 })
	defer q.Close()
	if _, err := q.Enqueue(req("ghost", "b", "c", "p", 5), req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	l, err := Describe(q, describeFake).Lease(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if keyName(l.Task.ID.Component) != "k" || l.Task.Spec.GetMemoObject() != "memo/k/b.arrow" || l.Task.Spec.GetClient() != "c" {
		t.Errorf("lease %+v spec %v", l, l.Task.Spec)
	}
	if qs := q.ListQuarantine(); len(qs) != 1 || keyName(qs[0].ID.Component) != "ghost" {
		t.Errorf("quarantine %+v", qs)
	}
}

// TestRemoteBadTask: a remote worker parses the component key it is sent,
// once, and refuses a task whose key is not 64 hex digits or whose block is
// missing, naming the field, rather than run it.
func TestRemoteBadTask(t *testing.T) {
	good := nameKey("k").String()
	deadline := timestamppb.New(t0)
	cases := []struct {
		task *sigv1.Task
		want string
	}{
		{&sigv1.Task{ComponentKey: "k", BlockId: "b"}, "component_key"},
		{&sigv1.Task{ComponentKey: good[:63], BlockId: "b"}, "component_key"},
		{&sigv1.Task{ComponentKey: good + "00", BlockId: "b"}, "component_key"},
		{&sigv1.Task{ComponentKey: good, BlockId: ""}, "block id"},
	}
	for _, c := range cases {
		_, err := leaseFromProto("w", &sigv1.LeaseTaskResponse{Task: c.task, LeaseId: "l", Deadline: deadline})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("task %v: %v, want ErrInvalid naming %s", c.task, err, c.want)
		}
	}
	l, err := leaseFromProto("w", &sigv1.LeaseTaskResponse{Task: &sigv1.Task{ComponentKey: good, BlockId: "b"}, LeaseId: "l", Deadline: deadline})
	if err != nil || l.Task.ID != (TaskID{nameKey("k"), blockref.ParseMemo("b")}) {
		t.Errorf("good task: %+v, %v", l.Task.ID, err)
	}
}
