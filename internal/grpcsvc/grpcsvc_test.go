package grpcsvc_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/grpcsvc"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// TestRegister: over a real socket, reflection lists every service, health
// answers SERVING for each of them and for the server, NotFound for a
// service the server does not serve, and NOT_SERVING for all after
// Shutdown.
func TestRegister(t *testing.T) {
	gs := grpc.NewServer()
	sigv1.RegisterWorkersServer(gs, sigv1.UnimplementedWorkersServer{})
	sigv1.RegisterFeatureStatsServer(gs, sigv1.UnimplementedFeatureStatsServer{})
	h := grpcsvc.Register(gs)
	conn := serve(t, gs)
	defer gs.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	listed := listServices(ctx, t, conn)
	for _, want := range []string{"sig.v1.Workers", "sig.v1.FeatureStats", "grpc.health.v1.Health"} {
		if !slices.Contains(listed, want) {
			t.Errorf("reflection lists %v, not %s", listed, want)
		}
	}
	if got, want := h.Services(), append([]string{""}, listed...); !slices.Equal(got, want) {
		t.Errorf("health answers for %q, want the server and every listed service %q", got, want)
	}
	hc := healthpb.NewHealthClient(conn)
	check := func(name string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		return r.GetStatus(), err
	}
	for _, name := range append([]string{""}, listed...) {
		if st, err := check(name); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v, %v; want SERVING", name, st, err)
		}
	}
	if _, err := check("sig.v1.SIG"); status.Code(err) != codes.NotFound {
		t.Errorf("health of a service not served: %v, want NotFound", err)
	}
	h.Shutdown()
	for _, name := range append([]string{""}, listed...) {
		if st, err := check(name); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health of %q after Shutdown: %v, %v; want NOT_SERVING", name, st, err)
		}
	}
}

// listServices asks the server's reflection service for its services,
// sorted.
func listServices(ctx context.Context, t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		out = append(out, s.GetName())
	}
	slices.Sort(out)
	return out
}

// TestStop: Stop says NOT_SERVING to a health watcher first, drains for at
// most its bound, then cuts off a stream that is still open (the watch
// itself), and returns; with nothing open it returns at once.
func TestStop(t *testing.T) {
	gs := grpc.NewServer()
	h := grpcsvc.Register(gs)
	conn := serve(t, gs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch update %v, %v", r, err)
	}
	const bound = 300 * time.Millisecond
	start := time.Now()
	stopped := make(chan time.Duration)
	go func() {
		h.Stop(bound)
		stopped <- time.Since(start)
	}()
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch update after Stop %v, %v; want NOT_SERVING", r, err)
	}
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("open stream after the bound: %v, want Unavailable (cut off)", err)
	}
	if took := <-stopped; took < bound || took > bound+5*time.Second {
		t.Errorf("Stop took %v with a stream open, want the bound %v", took, bound)
	}

	gs = grpc.NewServer()
	h = grpcsvc.Register(gs)
	serve(t, gs)
	start = time.Now()
	h.Stop(time.Minute)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Stop of an idle server took %v", took)
	}
}

// serve serves gs on a loopback port and returns a client connection to
// it, closed when the test ends.
func serve(t *testing.T, gs *grpc.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
