package sigd

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// MaxWatchesPerPrincipal bounds the WatchReadSolution streams one
// principal (one token) holds open at once. Each stream holds a
// subscription and re-reads its solution periodically; a trainer watches
// one solution per job, so 64 leaves room for a fleet of jobs and sigctl
// while a client opening streams in a loop cannot exhaust sigd's memory.
const MaxWatchesPerPrincipal = 64

// maxConcurrentStreams is the HTTP/2 stream limit of one gRPC connection
// (grpc-go's default is unlimited). Generous: it only stops a single
// connection from opening streams without bound.
const maxConcurrentStreams = 1024

// watchLimiter counts open WatchReadSolution streams per principal.
type watchLimiter struct {
	mu   sync.Mutex
	open map[auth.Principal]int
}

// interceptor refuses a watch beyond MaxWatchesPerPrincipal with
// ResourceExhausted. It runs after authentication; calls without a
// principal pass through to be refused by the handler.
func (l *watchLimiter) interceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod != sigv1.SIG_WatchReadSolution_FullMethodName {
			return h(srv, ss)
		}
		p := auth.FromContext(ss.Context())
		if p == nil {
			return h(srv, ss)
		}
		if !l.acquire(*p) {
			return status.Errorf(codes.ResourceExhausted,
				"%s already has %d open WatchReadSolution streams, the limit per token: end one before watching another",
				p.Name, MaxWatchesPerPrincipal)
		}
		defer l.release(*p)
		return h(srv, ss)
	}
}

func (l *watchLimiter) acquire(p auth.Principal) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[p] >= MaxWatchesPerPrincipal {
		return false
	}
	if l.open == nil {
		l.open = map[auth.Principal]int{}
	}
	l.open[p]++
	return true
}

func (l *watchLimiter) release(p auth.Principal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[p]--; l.open[p] <= 0 {
		delete(l.open, p)
	}
}
