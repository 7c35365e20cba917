package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// A remote command calls a gRPC server of the project: sigd, or (hold) a
// training job's controller. What every one of them does alike is here,
// once: the connection flags (--sigd or --trainer, --token, --tls,
// --timeout), --json, parsing the flags (each also reads SIG_<FLAG>),
// dialing, the deadline of each call, printing a response as JSON or as
// text, closing the connection. A command is its own flags and its calls.
type remote struct {
	name, usage string
	// server is the server called (the address flag); sigd when zero.
	server server
	// json is the usage of --json; "" for a command that prints no JSON.
	json string
	// flags adds the command's own flags to fs and returns its run, which
	// is called with the positional arguments once the flags are parsed.
	// It checks them before it calls anything (a usage error sends
	// nothing).
	flags func(fs *flag.FlagSet) func(s *session, pos []string) error
}

// server is a gRPC server remote commands call: its address flag.
type server struct {
	flag, addr, what string
	token            string // usage of --token: whose token
}

var (
	sigdServer       = server{flag: "sigd", addr: "127.0.0.1:7070", what: "sigd gRPC address", token: "bearer token"}
	controllerServer = server{flag: "trainer", addr: "127.0.0.1:7100", what: "the training job's controller gRPC address",
		token: "bearer token: the job's client or an operator"}
)

func registerRemote(r remote) {
	commands.Register(cli.Command{Name: r.name, Usage: r.usage, Run: r.run})
}

func (r remote) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags(r.name, stderr)
	s := sessionFlags(fs, r.server, r.json)
	run := r.flags(fs)
	pos, err := cli.ParseEnvArgs(fs, args)
	if err != nil {
		return err
	}
	s.ctx, s.stdout = ctx, stdout
	defer s.close()
	return run(s, pos)
}

// session is one run of a remote command: its connection, dialed by the
// first call, and how it prints.
type session struct {
	ctx    context.Context
	stdout io.Writer
	conn   *cli.Conn
	// timeout is the deadline of one call (--timeout); a command whose
	// call may take longer raises it before calling.
	timeout time.Duration
	json    bool
	cc      *grpc.ClientConn
}

// sessionFlags adds the flags of a connection to srv (sigd when zero), and
// --json when json is its usage, to fs.
func sessionFlags(fs *flag.FlagSet, srv server, json string) *session {
	if srv == (server{}) {
		srv = sigdServer
	}
	s := &session{conn: cli.ConnFlags(fs, srv.flag, srv.addr, srv.what, srv.token)}
	fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "deadline of a call")
	if json != "" {
		fs.BoolVar(&s.json, "json", false, json)
	}
	return s
}

func (s *session) dial() (*grpc.ClientConn, error) {
	if s.cc == nil {
		cc, err := s.conn.Dial()
		if err != nil {
			return nil, err
		}
		s.cc = cc
	}
	return s.cc, nil
}

func (s *session) close() {
	if s.cc != nil {
		s.cc.Close()
	}
}

// sigd is the client of sigd's SIG service, for the calls call does not
// make (streams).
func (s *session) sigd() (sigv1.SIGClient, error) {
	cc, err := s.dial()
	if err != nil {
		return nil, err
	}
	return sigv1.NewSIGClient(cc), nil
}

// invoke makes one unary call, method of the client newClient makes (a
// method expression: trainerv1.ControllerClient.ListHolds), within the
// session's timeout.
func invoke[C, Req, Resp any](s *session, newClient func(grpc.ClientConnInterface) C,
	method func(C, context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	cc, err := s.dial()
	if err != nil {
		var none Resp
		return none, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	return method(newClient(cc), ctx, req)
}

// call makes one unary call to sigd's SIG service (sigv1.SIGClient.Stats).
func call[Req, Resp any](s *session, method func(sigv1.SIGClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
	req Req) (Resp, error) {
	return invoke(s, sigv1.NewSIGClient, method, req)
}

// print writes m as JSON under --json, else as text.
func (s *session) print(m proto.Message, text func(w io.Writer) error) error {
	if s.json {
		return printJSON(s.stdout, m)
	}
	return text(s.stdout)
}

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// table starts a table on w, aligned as every sigctl table is, with its
// header line (columns separated by tabs); Flush ends it.
func table(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}
