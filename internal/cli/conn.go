package cli

import (
	"crypto/tls"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sigdata/sig/internal/auth"
)

// Dial connects to a gRPC server of the project with a bearer token. With
// useTLS the connection is TLS (system roots); otherwise plaintext, which is
// only for loopback and tests.
func Dial(addr, token string, useTLS bool) (*grpc.ClientConn, error) {
	if addr == "" {
		return nil, fmt.Errorf("no server address")
	}
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}
	if useTLS {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: !useTLS}))
	}
	return grpc.NewClient(addr, opts...)
}
