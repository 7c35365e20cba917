package ps

import (
	"context"

	"google.golang.org/grpc"

	"github.com/sigdata/sig/internal/auth"
	psv1 "github.com/sigdata/sig/proto/ps/v1"
)

// MaxMessageBytes bounds one packet. A coalesced packet carries a whole
// step's rows for one server, far more than gRPC's 4 MiB default.
const MaxMessageBytes = 256 << 20

// callOpts lift gRPC's message limits on the client's calls, whatever the
// connection was dialed with.
var callOpts = []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)}

// NewGRPCServer returns a gRPC server serving s, with the message limits
// packets need and, when tokens is non-nil, bearer-token authentication
// (internal/auth) admitting the trainer and operator roles. `trainer ps`,
// the network service, always has tokens (it refuses to start without
// them, as every SIG service refuses an unauthenticated caller); nil is
// for servers inside one process, the embeddings report's and tests'.
func NewGRPCServer(s *Server, tokens *auth.Tokens) *grpc.Server {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
	if tokens != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(tokens.UnaryInterceptor(), requireTrainer))
	}
	g := grpc.NewServer(opts...)
	psv1.RegisterParameterServerServer(g, s)
	return g
}

// requireTrainer admits only the roles that run training (after the token
// interceptor has identified the caller), and anyone to the public health
// and reflection services.
func requireTrainer(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if auth.Public(info.FullMethod) {
		return h(ctx, req)
	}
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator); err != nil {
		return nil, err
	}
	return h(ctx, req)
}
