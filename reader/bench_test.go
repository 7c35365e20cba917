package reader

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/flight"
	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
)

// The benchmarks here run the servers in the benchmark process and the
// consumer in a child process (this test binary re-executed as a load
// generator), over real loopback sockets. The benchmark process's CPU time
// (getrusage) is then the server side's alone: the reader's, or the bare
// gRPC server's. MinIO is a process of its own, so storage CPU is not
// counted in either mode. bench/reader.sh runs them and writes
// bench/reader.txt.

const loadgenEnv = "SIG_READER_LOADGEN"

func TestMain(m *testing.M) {
	if os.Getenv(loadgenEnv) != "" {
		if err := runLoadgen(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if readerBin != "" && buildErr == nil {
		os.RemoveAll(strings.TrimSuffix(readerBin, "/reader"))
	}
	os.Exit(code)
}

// loadCommand asks the load generator to read N units from Addr, cycling
// through Units (each a marshaled WorkUnit).
type loadCommand struct {
	Addr  string
	Units [][]byte
	N     int
	// Flight reads with Arrow Flight's DoGet (Arrow's own Flight reader
	// decoding every batch) instead of Read.
	Flight bool
}

type loadResult struct {
	Bytes, Rows, Batches int64
	Err                  string
}

// runLoadgen serves loadCommands, one JSON line each, answering each with a
// loadResult line. It reads units with the package's Client, decoding every
// batch as a trainer host would.
func runLoadgen(in io.Reader, out io.Writer) error {
	clients := map[string]*Client{}
	flights := map[string]flightpb.FlightServiceClient{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var cmd loadCommand
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return err
		}
		c := clients[cmd.Addr]
		if c == nil {
			var err error
			if c, err = NewClient(ClientConfig{Addresses: []string{cmd.Addr}}); err != nil {
				return err
			}
			clients[cmd.Addr] = c
		}
		var res loadResult
		for i := 0; i < cmd.N && res.Err == ""; i++ {
			u := &readerv1.WorkUnit{}
			if err := proto.Unmarshal(cmd.Units[i%len(cmd.Units)], u); err != nil {
				return err
			}
			if cmd.Flight {
				fc := flights[cmd.Addr]
				if fc == nil {
					conn, err := grpc.NewClient(cmd.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
						grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
						grpc.WithInitialWindowSize(8<<20), grpc.WithInitialConnWindowSize(16<<20), grpc.WithReadBufferSize(1<<20))
					if err != nil {
						return err
					}
					fc = flightpb.NewFlightServiceClient(conn)
					flights[cmd.Addr] = fc
				}
				if err := flightLoad(fc, u, &res); err != nil {
					res.Err = err.Error()
				}
				continue
			}
			for b, err := range c.ReadBatches(context.Background(), u) {
				if err != nil {
					res.Err = err.Error()
					break
				}
				res.Bytes += int64(len(b.IPC))
				res.Rows += b.Record.NumRows()
				res.Batches++
			}
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return sc.Err()
}

// flightLoad reads unit u with DoGet, decoding every batch with Arrow's
// own Flight reader, and counts it in res (Bytes: the batches' data_header
// and data_body).
func flightLoad(fc flightpb.FlightServiceClient, u *readerv1.WorkUnit, res *loadResult) error {
	t, err := proto.Marshal(&readerv1.ReadRequest{Unit: u})
	if err != nil {
		return err
	}
	stream, err := fc.DoGet(context.Background(), &flightpb.Ticket{Ticket: t})
	if err != nil {
		return err
	}
	counted := &countingStream{FlightService_DoGetClient: stream}
	rd, err := flight.NewRecordReader(counted)
	if err != nil {
		return err
	}
	defer rd.Release()
	for rd.Next() {
		res.Rows += rd.Record().NumRows()
		res.Batches++
	}
	res.Bytes += counted.bytes
	return rd.Err()
}

// countingStream counts the Arrow bytes of the batches a DoGet stream
// receives.
type countingStream struct {
	flightpb.FlightService_DoGetClient
	bytes int64
}

func (c *countingStream) Recv() (*flightpb.FlightData, error) {
	d, err := c.FlightService_DoGetClient.Recv()
	if err == nil && len(d.DataBody) > 0 {
		c.bytes += int64(len(d.DataHeader) + len(d.DataBody))
	}
	return d, err
}

// loadgen is the child process.
type loadgen struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startLoadgen(b *testing.B) *loadgen {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), loadgenEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	l := &loadgen{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return l
}

// measured is what one run of units cost the server side.
type measured struct {
	wall, cpu   time.Duration
	bytes, rows int64
}

func (m measured) add(o measured) measured {
	return measured{m.wall + o.wall, m.cpu + o.cpu, m.bytes + o.bytes, m.rows + o.rows}
}

// run reads n units from addr and returns the wall time, this process's CPU
// time, and what was delivered.
func (l *loadgen) run(b *testing.B, addr string, units []*readerv1.WorkUnit, n int) measured {
	b.Helper()
	return l.runCommand(b, loadCommand{Addr: addr, N: n}, units)
}

// runFlight is run with DoGet.
func (l *loadgen) runFlight(b *testing.B, addr string, units []*readerv1.WorkUnit, n int) measured {
	b.Helper()
	return l.runCommand(b, loadCommand{Addr: addr, N: n, Flight: true}, units)
}

func (l *loadgen) runCommand(b *testing.B, cmd loadCommand, units []*readerv1.WorkUnit) measured {
	b.Helper()
	for _, u := range units {
		m, err := proto.Marshal(u)
		if err != nil {
			b.Fatal(err)
		}
		cmd.Units = append(cmd.Units, m)
	}
	line, err := json.Marshal(cmd)
	if err != nil {
		b.Fatal(err)
	}
	// No runtime.GC() between runs: a forced collection before every run
	// left the reader's fetch buffers (segmentPool, a sync.Pool, which two
	// collections empty) to be allocated again, zeroed and faulted in at
	// every run, which a reader serving units back to back does not do;
	// and it took each run's garbage out of the count. Collections now
	// come when the garbage calls for them and count in the run that
	// triggers them.
	t0, c0 := time.Now(), cpuTime()
	if _, err := l.in.Write(append(line, '\n')); err != nil {
		b.Fatal(err)
	}
	if !l.out.Scan() {
		b.Fatalf("load generator exited: %v", l.out.Err())
	}
	m := measured{wall: time.Since(t0), cpu: cpuTime() - c0}
	var res loadResult
	if err := json.Unmarshal(l.out.Bytes(), &res); err != nil {
		b.Fatal(err)
	}
	if res.Err != "" {
		b.Fatal(res.Err)
	}
	m.bytes, m.rows = res.Bytes, res.Rows
	return m
}

// bareServer streams precomputed responses: the same bytes a reader sends
// for a unit, with none of the reader's work. It is the baseline of the
// throughput benchmark.
type bareServer struct {
	readerv1.UnimplementedReaderServer
	resps map[string][]*readerv1.ReadResponse // by block id
}

func (s *bareServer) Read(req *readerv1.ReadRequest, stream readerv1.Reader_ReadServer) error {
	for _, r := range s.resps[req.GetUnit().GetBlockId()] {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}

func serveOn(b *testing.B, register func(*grpc.Server)) string {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer(StreamServerOptions()...)
	register(gs)
	go gs.Serve(lis)
	b.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// benchGC sets the garbage collector as cmd/reader does for the benchmark's
// duration.
func benchGC(b *testing.B) {
	old := debug.SetGCPercent(DefaultGCPercent)
	b.Cleanup(func() { debug.SetGCPercent(old) })
}

const benchRows = 100_000

// BenchmarkThroughput compares a reader serving SIG units (every input from
// its memo object; 100k-row blocks of the ctr_small pipeline) with a bare
// gRPC server streaming the very same responses from memory, in the same
// run, over loopback. Per core = per CPU-second of the server process.
func BenchmarkThroughput(b *testing.B) {
	f := newFixture(b, fixtureConfig{Blocks: 4, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, "ctr_small"), Packed: true})
	benchGC(b)
	srv := f.server(b, Config{})
	var units []*readerv1.WorkUnit
	bare := &bareServer{resps: map[string][]*readerv1.ReadResponse{}}
	for i := range f.blocks {
		u := f.unit(i, 4096, allMode(memo))
		units = append(units, u)
		resps, err := collect(context.Background(), srv, &readerv1.ReadRequest{Unit: u})
		if err != nil {
			b.Fatal(err)
		}
		bare.resps[u.BlockId] = resps
	}
	readerAddr := serveOn(b, func(gs *grpc.Server) { readerv1.RegisterReaderServer(gs, srv) })
	bareAddr := serveOn(b, func(gs *grpc.Server) { readerv1.RegisterReaderServer(gs, bare) })
	lg := startLoadgen(b)
	lg.run(b, readerAddr, units, 1) // warm up connections
	lg.run(b, bareAddr, units, 1)
	b.Run("sig-vs-bare", func(b *testing.B) {
		var rd, br measured
		// Alternate so that both see the same machine conditions.
		for i := 0; i < b.N; i++ {
			br = br.add(lg.run(b, bareAddr, units, 1))
			rd = rd.add(lg.run(b, readerAddr, units, 1))
		}
		if rd.bytes != br.bytes || rd.rows != br.rows {
			b.Fatalf("reader sent %d bytes/%d rows, bare %d/%d", rd.bytes, rd.rows, br.bytes, br.rows)
		}
		mb := float64(rd.bytes) / 1e6
		ex := float64(rd.rows)
		b.ReportMetric(mb/rd.wall.Seconds(), "reader-MB/s")
		b.ReportMetric(mb/br.wall.Seconds(), "bare-MB/s")
		b.ReportMetric(mb/rd.cpu.Seconds(), "reader-MB/cpu-s")
		b.ReportMetric(mb/br.cpu.Seconds(), "bare-MB/cpu-s")
		b.ReportMetric(ex/rd.cpu.Seconds(), "reader-ex/cpu-s")
		b.ReportMetric(ex/br.cpu.Seconds(), "bare-ex/cpu-s")
		b.ReportMetric(br.cpu.Seconds()/rd.cpu.Seconds(), "ratio/core")
		b.ReportMetric(br.wall.Seconds()/rd.wall.Seconds(), "ratio/wall")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkInputCost measures the CPU a reader spends per example serving
// the same units of a pipeline in SIG mode (memo objects) and in LIG mode
// (computing every input from the raw block), in the same run (paper IV.B:
// input readers 4.3x-7.5x cheaper with SIG). One sub-benchmark per example
// pipeline; ctr_small is the typical one.
func BenchmarkInputCost(b *testing.B) {
	names := []string{"ctr_small", "ctr_wide", "cvr", "explore", "ranking"}
	f := newFixture(b, fixtureConfig{Blocks: 2, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, names...), Packed: true})
	benchGC(b)
	srv := f.server(b, Config{})
	addr := serveOn(b, func(gs *grpc.Server) { readerv1.RegisterReaderServer(gs, srv) })
	lg := startLoadgen(b)
	for gi, name := range names {
		units := map[readerv1.InputMode][]*readerv1.WorkUnit{}
		for _, mode := range []readerv1.InputMode{memo, local} {
			for bi := range f.blocks {
				u := f.unit(bi, 4096, allMode(mode))
				var ins []*readerv1.ModelInput
				for _, in := range u.Inputs {
					if strings.HasPrefix(in.Name, fmt.Sprintf("g%d_", gi)) {
						ins = append(ins, in)
					}
				}
				u.Inputs = ins
				units[mode] = append(units[mode], u)
			}
		}
		lg.run(b, addr, units[memo], 1) // warm up
		b.Run(name, func(b *testing.B) {
			var sig, lig measured
			for i := 0; i < b.N; i++ {
				sig = sig.add(lg.run(b, addr, units[memo], len(f.blocks)))
				lig = lig.add(lg.run(b, addr, units[local], len(f.blocks)))
			}
			if sig.bytes != lig.bytes || sig.rows != lig.rows {
				b.Fatalf("SIG sent %d bytes/%d rows, LIG %d/%d", sig.bytes, sig.rows, lig.bytes, lig.rows)
			}
			b.ReportMetric(float64(sig.cpu.Nanoseconds())/float64(sig.rows), "sig-cpu-ns/ex")
			b.ReportMetric(float64(lig.cpu.Nanoseconds())/float64(lig.rows), "lig-cpu-ns/ex")
			b.ReportMetric(lig.cpu.Seconds()/sig.cpu.Seconds(), "lig/sig")
			b.ReportMetric(float64(sig.bytes)/float64(sig.rows), "B/ex")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// stockFlight serves DoGet as Arrow's own Flight writer would: the unit's
// columns loaded as the reader loads them, then each batch written as a
// record slice by flight.NewRecordWriter (which serializes the body into a
// buffer, marshaled again by gRPC's codec). It is the baseline that shows
// what hand-marshaling FlightData (encodeFlight) saves.
type stockFlight struct {
	flightpb.UnimplementedFlightServiceServer
	s *Server
}

func (f *stockFlight) DoGet(t *flightpb.Ticket, stream flightpb.FlightService_DoGetServer) error {
	req := &readerv1.ReadRequest{}
	if err := proto.Unmarshal(t.GetTicket(), req); err != nil {
		return err
	}
	p, err := newPlan(req.Unit, f.s.cfg.Registry, f.s.cfg.Limits)
	if err != nil {
		return err
	}
	bufs := &unitBuffers{}
	defer bufs.release()
	cols, n, err := f.s.load(stream.Context(), p, bufs.alloc)
	if err != nil {
		return err
	}
	rec := array.NewRecord(p.out, cols, n)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(p.out))
	b := int64(p.batchRows)
	for lo := req.StartRow; lo < n; {
		hi := min((lo/b+1)*b, n)
		meta, _ := proto.Marshal(&readerv1.ReadResponse{StartRow: lo, Rows: hi - lo})
		slice := rec.NewSlice(lo, hi)
		err := w.WriteWithAppMetadata(slice, meta)
		slice.Release()
		if err != nil {
			return err
		}
		lo = hi
	}
	return w.Close()
}

// BenchmarkFlight compares, in the same run and on the same SIG units of
// ctr_small (100k-row blocks), a reader serving Read with the same reader
// serving Arrow Flight's DoGet (hand-marshaled FlightData, encodeFlight),
// and with DoGet written by Arrow's own Flight writer (stockFlight),
// alternating, over loopback. Per core = per CPU-second of the server
// process; ratio/core is Read's CPU over DoGet's (1: DoGet costs what Read
// does). The consumer, in a child process, decodes every batch (Read with
// the package's Client, DoGet with Arrow's Flight reader).
func BenchmarkFlight(b *testing.B) {
	f := newFixture(b, fixtureConfig{Blocks: 4, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, "ctr_small"), Packed: true})
	benchGC(b)
	srv := f.server(b, Config{})
	var units []*readerv1.WorkUnit
	for i := range f.blocks {
		units = append(units, f.unit(i, 4096, allMode(memo)))
	}
	addr := serveOn(b, func(gs *grpc.Server) {
		readerv1.RegisterReaderServer(gs, srv)
		flightpb.RegisterFlightServiceServer(gs, srv.FlightService())
	})
	stockAddr := serveOn(b, func(gs *grpc.Server) {
		flightpb.RegisterFlightServiceServer(gs, &stockFlight{s: srv})
	})
	lg := startLoadgen(b)
	lg.run(b, addr, units, 1) // warm up connections
	lg.runFlight(b, addr, units, 1)
	lg.runFlight(b, stockAddr, units, 1)
	b.Run("read-vs-doget", func(b *testing.B) {
		var rd, fl, st measured
		// Alternate so that all see the same machine conditions.
		for i := 0; i < b.N; i++ {
			rd = rd.add(lg.run(b, addr, units, 1))
			fl = fl.add(lg.runFlight(b, addr, units, 1))
			st = st.add(lg.runFlight(b, stockAddr, units, 1))
		}
		if rd.rows != fl.rows || rd.rows != st.rows {
			b.Fatalf("Read sent %d rows, DoGet %d, stock DoGet %d", rd.rows, fl.rows, st.rows)
		}
		ex := float64(rd.rows)
		b.ReportMetric(ex/rd.cpu.Seconds(), "read-ex/cpu-s")
		b.ReportMetric(ex/fl.cpu.Seconds(), "doget-ex/cpu-s")
		b.ReportMetric(ex/st.cpu.Seconds(), "stock-ex/cpu-s")
		b.ReportMetric(float64(rd.cpu.Nanoseconds())/ex, "read-cpu-ns/ex")
		b.ReportMetric(float64(fl.cpu.Nanoseconds())/ex, "doget-cpu-ns/ex")
		b.ReportMetric(float64(st.cpu.Nanoseconds())/ex, "stock-cpu-ns/ex")
		b.ReportMetric(float64(rd.bytes)/1e6/rd.wall.Seconds(), "read-MB/s")
		b.ReportMetric(float64(fl.bytes)/1e6/fl.wall.Seconds(), "doget-MB/s")
		b.ReportMetric(rd.cpu.Seconds()/fl.cpu.Seconds(), "ratio/core")
		b.ReportMetric(rd.cpu.Seconds()/st.cpu.Seconds(), "stock-ratio/core")
		b.ReportMetric(rd.wall.Seconds()/fl.wall.Seconds(), "ratio/wall")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkGuard measures the shared-fate guard's cost (guard.go): per
// example pipeline, the same SIG units (100k-row blocks, every input from
// its memo object) served over loopback by a reader without the guard, one
// with the default sample (16 rows per input, drawn per read), one guarding
// each input in one read of 8 (GuardEvery) and one sampling 1024 rows, alternating in the
// same run. Per example: the server process's CPU, and
// the raw column bytes the guard adds to a unit's fetch (the columns the
// pipeline's components read, whole segments). guard16/off is the
// overhead bench/reader.sh reports.
func BenchmarkGuard(b *testing.B) {
	names := []string{"ctr_small", "ctr_wide", "cvr", "explore", "ranking"}
	f := newFixture(b, fixtureConfig{Blocks: 2, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, names...), Packed: true})
	benchGC(b)
	servers := []struct {
		name string
		cfg  Config
	}{{"off", Config{GuardSampleRows: -1}}, {"guard16", Config{}}, {"guard16every8", Config{GuardEvery: 8}},
		{"guard1024", Config{GuardSampleRows: 1024}}}
	addrs := make([]string, len(servers))
	for i, sv := range servers {
		srv := f.server(b, sv.cfg)
		addrs[i] = serveOn(b, func(gs *grpc.Server) { readerv1.RegisterReaderServer(gs, srv) })
	}
	lg := startLoadgen(b)
	for gi, name := range names {
		var units []*readerv1.WorkUnit
		cols := map[string]bool{}
		for bi := range f.blocks {
			u := f.unit(bi, 4096, nil)
			var ins []*readerv1.ModelInput
			for i, in := range u.Inputs {
				if strings.HasPrefix(in.Name, fmt.Sprintf("g%d_", gi)) {
					ins = append(ins, in)
					for _, c := range f.inputs[i].columns {
						cols[c] = true
					}
				}
			}
			u.Inputs = ins
			units = append(units, u)
		}
		var rawBytes, rawRows int64
		for _, blk := range f.blocks {
			for c := range cols {
				if c == transform.ColEventID || slices.Contains(DefaultLabels, c) {
					continue
				}
				m, _ := blk.meta.Column(c)
				rawBytes += m.Length
			}
			rawRows += blk.rows
		}
		for _, addr := range addrs {
			lg.run(b, addr, units, 1) // warm up
		}
		b.Run(name, func(b *testing.B) {
			ms := make([]measured, len(addrs))
			for i := 0; i < b.N; i++ {
				// Units of other ids each time, as a job's epochs read them:
				// the ones GuardEvery picks change.
				for bi, u := range units {
					u.UnitId = fmt.Sprintf("u%d-%d", bi, i)
				}
				for j, addr := range addrs {
					ms[j] = ms[j].add(lg.run(b, addr, units, len(f.blocks)))
				}
			}
			for j, sv := range servers {
				if ms[j].bytes != ms[0].bytes {
					b.Fatalf("%s sent %d bytes, off %d", sv.name, ms[j].bytes, ms[0].bytes)
				}
				b.ReportMetric(float64(ms[j].cpu.Nanoseconds())/float64(ms[j].rows), sv.name+"-cpu-ns/ex")
				if j > 0 {
					b.ReportMetric(ms[j].cpu.Seconds()/ms[0].cpu.Seconds(), sv.name+"/off")
				}
			}
			b.ReportMetric(float64(rawBytes)/float64(rawRows), "guard-raw-B/ex")
			b.ReportMetric(float64(ms[0].bytes)/float64(ms[0].rows), "sent-B/ex")
			b.ReportMetric(0, "ns/op")
		})
	}
}
