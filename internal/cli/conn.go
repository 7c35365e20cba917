package cli

import (
	"crypto/tls"
	"flag"
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

// Conn is how a command reaches a gRPC server of the project: the server's
// address, a bearer token and whether to use TLS, from the flags ConnFlags
// adds.
type Conn struct {
	Addr, Token string
	TLS         bool
}

// ConnFlags adds the flags of a connection to fs: --name ADDR (default
// addr; what says which server), --token (token says whose) and --tls.
func ConnFlags(fs *flag.FlagSet, name, addr, what, token string) *Conn {
	c := &Conn{}
	fs.StringVar(&c.Addr, name, addr, what)
	fs.StringVar(&c.Token, "token", "", token)
	fs.BoolVar(&c.TLS, "tls", false, "connect to --"+name+" with TLS")
	return c
}

// Dial connects to c's server (Dial).
func (c *Conn) Dial() (*grpc.ClientConn, error) { return Dial(c.Addr, c.Token, c.TLS) }
