package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sigdata/sig/internal/devenv"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// startReader runs the reader command in this process against m, with the
// sigdtest token file and extra flags, and waits for its output to match
// ready; it returns the submatches. The reader stops when the test ends.
func startReader(t *testing.T, m *devenv.MinIO, ready *regexp.Regexp, extra ...string) []string {
	t.Helper()
	tokens, _ := sigdtest.WriteTokens(t, t.TempDir())
	args := append([]string{"--listen", "127.0.0.1:0", "--s3-endpoint", m.Endpoint, "--s3-access-key", m.AccessKey,
		"--s3-secret-key", m.SecretKey, "--s3-bucket", "sig", "--tokens", tokens, "--log-level", "warn"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &devenv.SyncBuffer{}, &devenv.SyncBuffer{}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = run(ctx, args, stdout, stderr); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if runErr != nil && !t.Failed() {
			t.Errorf("reader: %v\n%s", runErr, stderr.String())
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		if m := ready.FindStringSubmatch(stdout.String()); m != nil {
			return m
		}
		select {
		case <-done:
			t.Fatalf("reader exited: %v\n%s", runErr, stderr.String())
		case <-deadline:
			t.Fatalf("reader output %q does not match %s", stdout.String(), ready)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var listeningLine = regexp.MustCompile(`listening on (\S+)\n`)

// TestReaderHealthAndReflection: grpcurl lists the reader's services
// through reflection, without a token, and health answers SERVING for each
// (sig.reader.v1.Reader answered NotFound, and reflection was not served):
// the Reader service and Arrow Flight's.
func TestReaderHealthAndReflection(t *testing.T) {
	addr := startReader(t, devenv.NewMinIO(t), listeningLine)[1]
	services := sigdtest.CheckHealth(t, addr)
	for _, want := range []string{"sig.reader.v1.Reader", "arrow.flight.protocol.FlightService"} {
		if !slices.Contains(services, want) {
			t.Fatalf("grpcurl lists %v, not %s", services, want)
		}
	}
}

var metricsLine = regexp.MustCompile(`listening on (\S+)\nmetrics on (http://\S+/metrics)\n`)

// TestReaderMetrics: with --metrics, the reader serves its Prometheus
// metrics over HTTP: units served by Read and by Flight's DoGet (rows,
// bytes, fetch latency), calls by API, and failed calls counted by the gRPC
// code the caller got, a token refused before any handler ran included
// (those went uncounted: the handlers counted, after authentication).
func TestReaderMetrics(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 500})
	tokens, toks := sigdtest.WriteTokens(t, t.TempDir())
	m := startReader(t, w.MinIO, metricsLine, "--metrics", "127.0.0.1:0", "--tokens", tokens)
	addr, metricsURL := m[1], m[2]
	rc := readerv1.NewReaderClient(sigdtest.Dial(t, addr, toks["trainer"]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(id string) (rows int64, err error) {
		stream, err := rc.Read(ctx, &readerv1.ReadRequest{Unit: &readerv1.WorkUnit{UnitId: "u", Client: "ctr",
			Pipeline: "p", RawSource: "ads", BlockId: id, RawObject: block.RawKey("ads", blockref.New(id, 1))}})
		if err != nil {
			return 0, err
		}
		for {
			r, err := stream.Recv()
			if err == io.EOF {
				return rows, nil
			}
			if err != nil {
				return rows, err
			}
			rows = r.GetSummary().GetRows()
		}
	}
	id := w.Blocks[0].ID
	if rows, err := read(id); err != nil || rows != 500 {
		t.Fatalf("read: %d rows, %v", rows, err)
	}
	// The next block of the partition, not written.
	if _, err := read(strings.TrimSuffix(id, "499") + "999"); status.Code(err) != codes.NotFound {
		t.Fatalf("read of a missing block: %v, want NotFound", err)
	}
	// The same unit through Flight's DoGet.
	ticket, err := proto.Marshal(&readerv1.ReadRequest{Unit: &readerv1.WorkUnit{UnitId: "u", Client: "ctr",
		Pipeline: "p", RawSource: "ads", BlockId: id, RawObject: block.RawKey("ads", blockref.New(id, 1))}})
	if err != nil {
		t.Fatal(err)
	}
	doGet := func(fc flightpb.FlightServiceClient) error {
		stream, err := fc.DoGet(ctx, &flightpb.Ticket{Ticket: ticket})
		if err != nil {
			return err
		}
		for {
			if _, err := stream.Recv(); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	if err := doGet(flightpb.NewFlightServiceClient(sigdtest.Dial(t, addr, toks["trainer"]))); err != nil {
		t.Fatalf("DoGet: %v", err)
	}
	// A token the reader does not know: refused by the auth interceptor,
	// before Read's or DoGet's handler.
	bogus := sigdtest.Dial(t, addr, "not-a-token")
	if err := doGet(flightpb.NewFlightServiceClient(bogus)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("DoGet with an unknown token: %v, want Unauthenticated", err)
	}
	rc = readerv1.NewReaderClient(bogus)
	if _, err := read(id); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Read with an unknown token: %v, want Unauthenticated", err)
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", metricsURL, resp.Status, err)
	}
	for _, want := range []string{
		reader.MetricUnits + " 2\n",
		reader.MetricRows + " 1000\n",
		reader.MetricErrors + `{code="NotFound"} 1` + "\n",
		reader.MetricErrors + `{code="Unauthenticated"} 2` + "\n",
		reader.MetricCalls + `{api="read"} 3` + "\n",
		reader.MetricCalls + `{api="flight_do_get"} 2` + "\n",
		reader.MetricFetch + "_count 2\n",
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if !regexp.MustCompile(`(?m)^` + reader.MetricBytes + ` [1-9]`).Match(body) {
		t.Errorf("/metrics: no bytes sent")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
