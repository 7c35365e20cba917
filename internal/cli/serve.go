package cli

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// ServerTLSFlags adds --tls-cert and --tls-key, a gRPC server's
// certificate and key, to fs, and returns the function that, after
// parsing, makes the server options they say: TLS with them, none without.
func ServerTLSFlags(fs *flag.FlagSet) func() ([]grpc.ServerOption, error) {
	cert := fs.String("tls-cert", "", "serve gRPC over TLS with this certificate (PEM)")
	key := fs.String("tls-key", "", "private key of --tls-cert (PEM)")
	return func() ([]grpc.ServerOption, error) {
		if *cert == "" && *key == "" {
			return nil, nil
		}
		creds, err := credentials.NewServerTLSFromFile(*cert, *key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		return []grpc.ServerOption{grpc.Creds(creds)}, nil
	}
}

// ServeMetrics serves g's metrics at /metrics over HTTP on addr (a
// command's --metrics) until close is called, and returns the URL. Slow or
// idle clients do not hold connections.
func ServeMetrics(addr string, g prometheus.Gatherer) (url string, close func() error, err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(lis) }()
	return "http://" + lis.Addr().String() + "/metrics", srv.Close, nil
}
