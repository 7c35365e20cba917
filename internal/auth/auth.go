package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Role is what a token may do.
type Role string

// Roles.
const (
	RoleClient   Role = "client"
	RoleOperator Role = "operator"
	RoleWorker   Role = "worker"
	RoleTrainer  Role = "trainer"
	RoleReader   Role = "reader"
)

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the token's holder (for audit logs).
	Name string `json:"name"`
	// Client is the client the token acts for (client and trainer roles).
	Client string `json:"client"`
	Role   Role   `json:"role"`
}

// IsOperator reports whether p has the operator role.
func (p *Principal) IsOperator() bool { return p != nil && p.Role == RoleOperator }

// MayActFor reports whether p may act on pipelines of client.
func (p *Principal) MayActFor(client string) bool {
	if p == nil {
		return false
	}
	return p.Role == RoleOperator || ((p.Role == RoleClient || p.Role == RoleTrainer) && p.Client == client)
}

// Entry is one token of the config file.
type Entry struct {
	Token string `json:"token"`
	Principal
}

// File is the token config file:
//
//	{"tokens": [
//	  {"token": "s3cr3t", "name": "ctr-team", "role": "client", "client": "ctr"},
//	  {"token": "...", "name": "alice", "role": "operator"},
//	  {"token": "...", "name": "worker-pool", "role": "worker"}
//	]}
type File struct {
	Tokens []Entry `json:"tokens"`
}

// Tokens maps tokens to principals. Only hashes of the tokens are kept.
type Tokens struct {
	byHash map[[32]byte]Principal
}

// Load reads a token file.
func Load(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return New(f.Tokens)
}

// New builds the token table, checking every entry.
func New(entries []Entry) (*Tokens, error) {
	t := &Tokens{byHash: map[[32]byte]Principal{}}
	for i, e := range entries {
		if len(e.Token) < 16 {
			return nil, fmt.Errorf("token %d (%s): tokens must be at least 16 characters", i, e.Name)
		}
		switch e.Role {
		case RoleClient, RoleTrainer:
			if e.Client == "" {
				return nil, fmt.Errorf("token %d (%s): role %s needs a client", i, e.Name, e.Role)
			}
		case RoleOperator, RoleWorker, RoleReader:
		default:
			return nil, fmt.Errorf("token %d (%s): unknown role %q", i, e.Name, e.Role)
		}
		h := sha256.Sum256([]byte(e.Token))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("token %d (%s): duplicate token", i, e.Name)
		}
		if e.Name == "" {
			e.Name = string(e.Role) + ":" + e.Client
		}
		t.byHash[h] = e.Principal
	}
	return t, nil
}

// Lookup returns the principal of a token.
func (t *Tokens) Lookup(token string) (Principal, bool) {
	// The table is keyed by SHA-256 of the token, so lookup timing depends
	// on the hash, not on how close a guess is to a real token.
	p, ok := t.byHash[sha256.Sum256([]byte(token))]
	return p, ok
}

type ctxKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, &p)
}

// FromContext returns the caller, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// Public methods need no token (health checks and reflection).
var publicPrefixes = []string{"/grpc.health.v1.Health/", "/grpc.reflection."}

// Public reports whether a full method name ("/pkg.Service/Method") is one
// that needs no token. Interceptors that check roles after authentication
// let these through too.
func Public(method string) bool {
	for _, p := range publicPrefixes {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

func (t *Tokens) authenticate(ctx context.Context, method string) (context.Context, error) {
	if Public(method) {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, status.Error(codes.Unauthenticated, "missing authorization: send \"authorization: Bearer <token>\"")
	}
	tok, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "authorization must be \"Bearer <token>\"")
	}
	p, ok := t.Lookup(strings.TrimSpace(tok))
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return WithPrincipal(ctx, p), nil
}

// UnaryInterceptor authenticates unary calls.
func (t *Tokens) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := t.authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w wrappedStream) Context() context.Context { return w.ctx }

// StreamInterceptor authenticates streaming calls.
func (t *Tokens) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := t.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return h(srv, wrappedStream{ss, ctx})
	}
}

// Require returns the caller if it has one of the roles, else a
// PermissionDenied (or Unauthenticated when there is no caller) error.
func Require(ctx context.Context, roles ...Role) (*Principal, error) {
	p := FromContext(ctx)
	if p == nil {
		return nil, status.Error(codes.Unauthenticated, "no credentials")
	}
	for _, r := range roles {
		if p.Role == r {
			return p, nil
		}
	}
	return nil, status.Errorf(codes.PermissionDenied, "%s (role %s) may not call this; it needs role %v", p.Name, p.Role, roles)
}

// RequireClient returns the caller if it may act for client.
func RequireClient(ctx context.Context, client string) (*Principal, error) {
	p := FromContext(ctx)
	if p == nil {
		return nil, status.Error(codes.Unauthenticated, "no credentials")
	}
	if !p.MayActFor(client) {
		return nil, status.Errorf(codes.PermissionDenied, "%s may not act for client %q", p.Name, client)
	}
	return p, nil
}

// BearerCredentials are per-RPC credentials carrying a token, for clients.
type BearerCredentials struct {
	Token string
	// Insecure allows sending the token over a connection without TLS
	// (loopback development and tests).
	Insecure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b BearerCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (b BearerCredentials) RequireTransportSecurity() bool { return !b.Insecure }
