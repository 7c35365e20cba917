package grpcsvc

import (
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// Health is the health service of one server.
type Health struct {
	srv      *health.Server
	server   *grpc.Server
	services []string
}

// Register registers health and reflection on s and marks the server ("")
// and every service it serves SERVING. Call it after the server's own
// services are registered and before Serve: the health entries are the
// services s serves at the call, so one registered later would answer
// NotFound (gRPC refuses registrations after Serve anyway).
func Register(s *grpc.Server) *Health {
	h := &Health{srv: health.NewServer(), server: s}
	healthpb.RegisterHealthServer(s, h.srv)
	reflection.Register(s)
	h.services = []string{""}
	for name := range s.GetServiceInfo() {
		h.services = append(h.services, name)
	}
	slices.Sort(h.services)
	for _, name := range h.services {
		h.srv.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	return h
}

// Services returns the names health answers for, sorted; "" is the whole
// server.
func (h *Health) Services() []string { return slices.Clone(h.services) }

// Shutdown marks every service NOT_SERVING for good, so that probes and
// balancers stop sending calls before a graceful stop drains the rest.
func (h *Health) Shutdown() { h.srv.Shutdown() }

// Stop stops the server gracefully, as every server of SIG stops: health
// says NOT_SERVING first (Shutdown), the calls and streams in flight then
// have up to d to finish (a reader's unit, a host's last messages), and
// whatever is still open after d is cut off. d < 0: no bound.
func (h *Health) Stop(d time.Duration) {
	h.Shutdown()
	done := make(chan struct{})
	go func() {
		h.server.GracefulStop()
		close(done)
	}()
	if d < 0 {
		<-done
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		h.server.Stop()
		<-done
	}
}
