package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// fakeSIG answers the eviction RPCs like sigd (operator-only eviction,
// paged search) and records what it was asked. The eviction itself is
// tested against a real sigd in package eviction.
type fakeSIG struct {
	sigv1.UnimplementedSIGServer
	mu       sync.Mutex
	tokens   []string
	searches []*sigv1.SearchComponentsRequest
	evicts   []*sigv1.EvictRequest
}

const (
	opToken     = "operator-token-0123456789"
	clientToken = "client-token-0123456789"
	keyA        = "aaaa0000000000000000000000000000000000000000000000000000000000aa"
	keyB        = "bbbb0000000000000000000000000000000000000000000000000000000000bb"
)

func (f *fakeSIG) caller(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	tok := strings.TrimPrefix(strings.Join(md.Get("authorization"), ""), "Bearer ")
	f.mu.Lock()
	f.tokens = append(f.tokens, tok)
	f.mu.Unlock()
	return tok
}

func (f *fakeSIG) SearchComponents(ctx context.Context, req *sigv1.SearchComponentsRequest) (*sigv1.SearchComponentsResponse, error) {
	f.caller(ctx)
	f.mu.Lock()
	f.searches = append(f.searches, proto.Clone(req).(*sigv1.SearchComponentsRequest))
	f.mu.Unlock()
	a := &sigv1.ComponentSummary{Key: keyA, CanonicalDsl: "input out = hash(unigrams(lower(col(\"query\"))), buckets=10)\n",
		BlocksReady: 3, Bytes: 300, Pipelines: []string{"ctr/ctr-small", "cvr/<script>"}}
	b := &sigv1.ComponentSummary{Key: keyB, CanonicalDsl: "input out = unigrams(lower(col(\"query\")))\n", BlocksPending: 2}
	if req.PageToken == "" {
		return &sigv1.SearchComponentsResponse{Components: []*sigv1.ComponentSummary{a}, NextPageToken: keyA}, nil
	}
	return &sigv1.SearchComponentsResponse{Components: []*sigv1.ComponentSummary{b}}, nil
}

func (f *fakeSIG) GetComponent(ctx context.Context, req *sigv1.GetComponentRequest) (*sigv1.GetComponentResponse, error) {
	f.caller(ctx)
	if req.Key != keyA {
		return nil, status.Error(codes.NotFound, "no such component")
	}
	return &sigv1.GetComponentResponse{Component: &sigv1.ComponentSummary{Key: keyA, Type: "list<int64>", Nodes: 4,
		CanonicalDsl: "input out = x\n", Pipelines: []string{"ctr/ctr-small"}, BlocksReady: 1},
		Blocks: []*sigv1.BlockRead{{BlockId: "b000", State: sigv1.BlockState_BLOCK_STATE_READY, Rows: 10, Bytes: 100}}}, nil
}

func (f *fakeSIG) Evict(ctx context.Context, req *sigv1.EvictRequest) (*sigv1.EvictResponse, error) {
	if f.caller(ctx) != opToken {
		return nil, status.Error(codes.PermissionDenied, "needs role operator")
	}
	f.mu.Lock()
	f.evicts = append(f.evicts, proto.Clone(req).(*sigv1.EvictRequest))
	f.mu.Unlock()
	resp := &sigv1.EvictResponse{DryRun: req.DryRun, Components: []string{keyA, keyB}, Pipelines: []string{"ctr/ctr-small"},
		Blocks: 5, Bytes: 300}
	if !req.DryRun {
		resp.ObjectsDeleted, resp.AuditId = 5, "audit-1"
	}
	return resp, nil
}

func (f *fakeSIG) ListAudit(ctx context.Context, req *sigv1.ListAuditRequest) (*sigv1.ListAuditResponse, error) {
	if f.caller(ctx) != opToken {
		return nil, status.Error(codes.PermissionDenied, "needs role operator")
	}
	return &sigv1.ListAuditResponse{Entries: []*sigv1.AuditEntry{{Id: "audit-1", Who: "alice",
		When: timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), What: "subgraph lower(col(\"query\"))",
		Why: "tokenizer\nbug", Components: []string{keyA, keyB}, Blocks: 5, Bytes: 300}}}, nil
}

func startFakeSIG(t *testing.T) (*fakeSIG, string) {
	t.Helper()
	f := &fakeSIG{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	sigv1.RegisterSIGServer(gs, f)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return f, lis.Addr().String()
}

func sigctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSearchCommand(t *testing.T) {
	f, addr := startFakeSIG(t)
	code, out, errs := sigctl(t, "search", "--sigd", addr, "--token", clientToken, "--subgraph", `unigrams(lower(col("query")))`,
		"--client", "ctr", "--limit", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if len(f.searches) != 1 || f.searches[0].SubgraphDsl != `unigrams(lower(col("query")))` || f.searches[0].Client != "ctr" ||
		f.searches[0].Limit != 1 || f.tokens[0] != clientToken {
		t.Errorf("request %v with token %q", f.searches, f.tokens)
	}
	for _, want := range []string{keyA[:12], "ctr/ctr-small,cvr/<script>", "hash(unigrams(lower(col(\"query\"))), buckets=10)",
		"1 components; more with --after " + keyA} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// --all follows the pages.
	code, out, _ = sigctl(t, "search", "--sigd", addr, "--token", clientToken, "--all")
	if code != 0 || !strings.Contains(out, keyB[:12]) || !strings.Contains(out, "2 components\n") || len(f.searches) != 3 ||
		f.searches[2].PageToken != keyA {
		t.Errorf("search --all: exit %d, %d requests:\n%s", code, len(f.searches), out)
	}
	code, out, _ = sigctl(t, "search", "--sigd", addr, "--json")
	var resp map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || resp["nextPageToken"] != keyA {
		t.Errorf("search --json: exit %d:\n%s", code, out)
	}
	if code, _, _ := sigctl(t, "search", "--sigd", addr, "lower(x)"); code != 2 {
		t.Errorf("search with a positional argument: exit %d, want 2", code)
	}
}

func TestComponentCommand(t *testing.T) {
	_, addr := startFakeSIG(t)
	code, out, errs := sigctl(t, "component", keyA, "--sigd", addr)
	if code != 0 || !strings.Contains(out, "component "+keyA) || !strings.Contains(out, "b000") || !strings.Contains(out, "READY") {
		t.Errorf("exit %d (%s):\n%s", code, errs, out)
	}
	if code, _, errs := sigctl(t, "component", keyB, "--sigd", addr); code != 1 || !strings.Contains(errs, "NotFound") {
		t.Errorf("unknown component: exit %d: %s", code, errs)
	}
	if code, _, _ := sigctl(t, "component", "--sigd", addr); code != 2 {
		t.Errorf("component without a key: exit %d, want 2", code)
	}
}

func TestEvictCommand(t *testing.T) {
	f, addr := startFakeSIG(t)
	sub := `unigrams(lower(col("query")))`
	// Usage errors send nothing.
	for _, args := range [][]string{
		{"--subgraph", sub},                                  // neither --dry-run nor --reason
		{"--subgraph", sub, "--reason", "  "},                // blank reason
		{"--dry-run"},                                        // no target
		{"--subgraph", sub, "--node-key", keyA, "--dry-run"}, // two targets
		{"--subgraph", sub, "--dry-run", "--reason", "r"},    // a reason on a dry run
		{sub, "--dry-run"},                                   // positional target
	} {
		code, _, errs := sigctl(t, append([]string{"evict", "--sigd", addr, "--token", opToken}, args...)...)
		if code != 2 {
			t.Errorf("evict %q: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if len(f.evicts) != 0 {
		t.Fatalf("usage errors sent %d requests", len(f.evicts))
	}

	code, out, errs := sigctl(t, "evict", "--sigd", addr, "--token", opToken, "--subgraph", sub, "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run: would evict 5 memo blocks (300 bytes) of 2 components used by 1 pipelines") ||
		!strings.Contains(out, "component "+keyB) || !strings.Contains(out, "pipeline  ctr/ctr-small") {
		t.Errorf("dry run: exit %d (%s):\n%s", code, errs, out)
	}
	if r := f.evicts[0]; !r.DryRun || r.Reason != "" || r.GetSubgraphDsl() != sub {
		t.Errorf("dry run request %v", r)
	}

	t.Setenv("SIG_TOKEN", opToken)
	code, out, errs = sigctl(t, "evict", "--sigd", addr, "--node-key", keyA, "--reason", "tokenizer bug")
	if code != 0 || !strings.Contains(out, "evicted 5 memo blocks (300 bytes, 5 objects deleted) of 2 components") ||
		!strings.Contains(out, "audit entry audit-1") || !strings.Contains(out, "pending") {
		t.Errorf("eviction: exit %d (%s):\n%s", code, errs, out)
	}
	if r := f.evicts[1]; r.DryRun || r.Reason != "tokenizer bug" || r.GetNodeKey() != keyA {
		t.Errorf("eviction request %v", r)
	}

	code, out, _ = sigctl(t, "evict", "--sigd", addr, "--subgraph", sub, "--dry-run", "--json")
	var resp map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || resp["dryRun"] != true {
		t.Errorf("evict --json: exit %d:\n%s", code, out)
	}

	// The server's refusal is the command's failure.
	code, _, errs = sigctl(t, "evict", "--sigd", addr, "--token", clientToken, "--subgraph", sub, "--reason", "r")
	if code != 1 || !strings.Contains(errs, "PermissionDenied") {
		t.Errorf("client token: exit %d: %s", code, errs)
	}
}

func TestAuditCommand(t *testing.T) {
	_, addr := startFakeSIG(t)
	code, out, errs := sigctl(t, "audit", "--sigd", addr, "--token", opToken)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "2026-03-01T12:00:00Z") || !strings.Contains(lines[1], "alice") ||
		!strings.HasSuffix(lines[1], "tokenizer bug") {
		t.Errorf("audit output:\n%s", out)
	}
	if code, _, errs := sigctl(t, "audit", "--sigd", addr, "--token", clientToken); code != 1 || !strings.Contains(errs, "PermissionDenied") {
		t.Errorf("client token: exit %d: %s", code, errs)
	}
}
