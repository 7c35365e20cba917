package reader

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// Metric names of a Server (Config.Registerer).
const (
	// MetricUnits counts units served whole (summary sent).
	MetricUnits = "sig_reader_units_total"
	// MetricRows and MetricBytes count the rows and the arrow_ipc bytes of
	// the batches sent.
	MetricRows  = "sig_reader_rows_total"
	MetricBytes = "sig_reader_bytes_total"
	// MetricInputs counts input columns served, by mode (memo, local).
	MetricInputs = "sig_reader_inputs_total"
	// MetricCalls counts calls by API (api): read (Read), flight_do_get,
	// flight_get_flight_info and flight_get_schema (Arrow Flight's DoGet,
	// GetFlightInfo and GetSchema).
	MetricCalls = "sig_reader_calls_total"
	// MetricErrors counts calls of every API that failed, by the gRPC code
	// the caller got (code), a token refused by authentication included:
	// Unavailable is mostly a pending memo (a training hold, see doc.go),
	// DataLoss a corrupt object.
	MetricErrors = "sig_reader_errors_total"
	// MetricFetch is the time to fetch a unit's block: its raw columns and
	// memo objects, read concurrently, until all are decoded (units whose
	// fetch succeeded).
	MetricFetch = "sig_reader_fetch_seconds"
	// MetricObjectRequests counts the object store requests units made,
	// by object (raw, memo) and kind (tail: the read of an object's
	// footer and what precedes it, when the footer was not cached;
	// footer: a footer larger than that read; range: a coalesced range of
	// segments; fetch.go). Over MetricUnits it is the requests per unit
	// read (issue 28: at most 2 with packed memo objects).
	MetricObjectRequests = "sig_reader_object_requests_total"
	// MetricObjectWantedBytes counts the bytes of the segments units'
	// reads wanted, by object (raw, memo): the floor under the bytes the
	// store sent them, which also holds the holes coalesced reads spanned
	// and the tails read whole (fetch.go).
	MetricObjectWantedBytes = "sig_reader_object_wanted_bytes_total"
	// MetricObjectFetchedBytes counts the bytes those requests asked for
	// (a tail read: the bytes it got), by object and kind: what the store
	// sent, the wanted bytes and what the planning read beyond them.
	MetricObjectFetchedBytes = "sig_reader_object_fetched_bytes_total"
	// MetricFooterCache counts footer cache lookups by outcome: hit, miss,
	// and stale (a hit whose read failed and was made again from the
	// object).
	MetricFooterCache = "sig_reader_footer_cache_total"
	// MetricPlanCache counts plan cache lookups by outcome: hit, and miss
	// (the unit's input set was planned from scratch; plancache.go).
	MetricPlanCache = "sig_reader_plan_cache_total"
	// MetricTransform is the CPU time spent running transform programs,
	// by use: local (LOCAL inputs, the LIG work a unit does) and guard
	// (recomputing and comparing the guard's sampled rows): the serving
	// thread's CPU clock around each (onThreadCPU; 0 off Linux). Over the
	// process's CPU, local is the most that reading memo columns instead
	// can save (bench/caughtup.sh).
	MetricTransform = "sig_reader_transform_seconds_total"
)

var (
	descUnits  = prometheus.NewDesc(MetricUnits, "Units served whole.", nil, nil)
	descRows   = prometheus.NewDesc(MetricRows, "Rows of the batches sent.", nil, nil)
	descBytes  = prometheus.NewDesc(MetricBytes, "Bytes of the batches sent (Arrow IPC).", nil, nil)
	descInputs = prometheus.NewDesc(MetricInputs, "Input columns served, by mode.", []string{"mode"}, nil)

	descObjectRequests = prometheus.NewDesc(MetricObjectRequests, "Object store requests of units' reads, by object (raw, memo) and kind (tail, footer, range).",
		[]string{"object", "kind"}, nil)
	descObjectFetchedBytes = prometheus.NewDesc(MetricObjectFetchedBytes, "Bytes the object store requests of units' reads asked for, by object (raw, memo) and kind (tail, footer, range).",
		[]string{"object", "kind"}, nil)
	descObjectWantedBytes = prometheus.NewDesc(MetricObjectWantedBytes, "Bytes of the segments units' reads wanted, by object (raw, memo).",
		[]string{"object"}, nil)
	descFooterCache = prometheus.NewDesc(MetricFooterCache, "Footer cache lookups, by outcome (hit, miss, stale).", []string{"outcome"}, nil)
	descPlanCache   = prometheus.NewDesc(MetricPlanCache, "Plan cache lookups by input set, by outcome (hit, miss).", []string{"outcome"}, nil)
	descTransform   = prometheus.NewDesc(MetricTransform, "CPU time running transform programs, by use (local: LOCAL inputs; guard: the guard's samples).", []string{"use"}, nil)
)

// serverMetrics exports a Server's counters (kept as atomics for Stats, so
// read at scrape time), its errors by code and its fetch latency.
type serverMetrics struct {
	s      *Server
	calls  *prometheus.CounterVec
	errors *prometheus.CounterVec
	fetch  prometheus.Histogram
}

// The APIs of MetricCalls.
const (
	apiRead          = "read"
	apiDoGet         = "flight_do_get"
	apiGetFlightInfo = "flight_get_flight_info"
	apiGetSchema     = "flight_get_schema"
)

func newServerMetrics(s *Server) *serverMetrics {
	return &serverMetrics{s: s,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricCalls,
			Help: "Calls, by API: read, flight_do_get, flight_get_flight_info, flight_get_schema."}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricErrors,
			Help: "Calls (Read, Flight DoGet, GetFlightInfo and GetSchema) that failed, by gRPC code."}, []string{"code"}),
		// 1 ms to 33 s: a block from a local store is milliseconds, from a
		// remote one under load seconds.
		fetch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricFetch,
			Help: "Time to fetch and decode a unit's raw columns and memo objects.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
}

// The methods counted by MetricCalls and MetricErrors, by full method name
// (Flight's other methods list nothing or are unimplemented; health and
// reflection are not the reader's API).
var apiOfMethod = map[string]string{
	readerv1.Reader_Read_FullMethodName:                  apiRead,
	"/arrow.flight.protocol.FlightService/DoGet":         apiDoGet,
	"/arrow.flight.protocol.FlightService/GetFlightInfo": apiGetFlightInfo,
	"/arrow.flight.protocol.FlightService/GetSchema":     apiGetSchema,
}

// interceptors count every call of the reader's APIs and every failure by
// the code the caller got. They run outside the auth interceptors
// (GRPCServer), so that a token refused before the handler runs is counted
// too.
func (m *serverMetrics) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	count := func(method string, call func() error) error {
		api, ok := apiOfMethod[method]
		if !ok {
			return call()
		}
		m.calls.WithLabelValues(api).Inc()
		err := call()
		if err != nil {
			m.errors.WithLabelValues(status.Code(err).String()).Inc()
		}
		return err
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		err = count(info.FullMethod, func() error { resp, err = h(ctx, req); return err })
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return count(info.FullMethod, func() error { return h(srv, ss) })
	}
	return unary, stream
}

func (m *serverMetrics) fetched(d time.Duration) { m.fetch.Observe(d.Seconds()) }

// Describe implements prometheus.Collector.
func (m *serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUnits
	ch <- descRows
	ch <- descBytes
	ch <- descInputs
	ch <- descObjectRequests
	ch <- descObjectWantedBytes
	ch <- descObjectFetchedBytes
	ch <- descFooterCache
	ch <- descPlanCache
	ch <- descTransform
	m.calls.Describe(ch)
	m.errors.Describe(ch)
	m.fetch.Describe(ch)
	m.s.guardMetrics.describe(ch)
}

// Collect implements prometheus.Collector.
func (m *serverMetrics) Collect(ch chan<- prometheus.Metric) {
	st := m.s.Stats()
	ch <- prometheus.MustNewConstMetric(descUnits, prometheus.CounterValue, float64(st.Units))
	ch <- prometheus.MustNewConstMetric(descRows, prometheus.CounterValue, float64(st.Rows))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descInputs, prometheus.CounterValue, float64(st.MemoInputs), "memo")
	ch <- prometheus.MustNewConstMetric(descInputs, prometheus.CounterValue, float64(st.LocalInputs), "local")
	m.s.requests.collect(ch)
	ch <- prometheus.MustNewConstMetric(descFooterCache, prometheus.CounterValue, float64(st.Footers.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(descFooterCache, prometheus.CounterValue, float64(st.Footers.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(descFooterCache, prometheus.CounterValue, float64(st.Footers.Stale), "stale")
	ch <- prometheus.MustNewConstMetric(descPlanCache, prometheus.CounterValue, float64(st.Plans.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(descPlanCache, prometheus.CounterValue, float64(st.Plans.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(descTransform, prometheus.CounterValue, st.Transform.Local.Seconds(), "local")
	ch <- prometheus.MustNewConstMetric(descTransform, prometheus.CounterValue, st.Transform.Guard.Seconds(), "guard")
	m.calls.Collect(ch)
	m.errors.Collect(ch)
	m.fetch.Collect(ch)
	m.s.guardMetrics.collect(ch)
}
