package results

import (
	"maps"
	"math"
	"slices"
	"strings"
)

// Requests is what the object store served one side in an interval,
// counted by the store itself (MinIO's request counters, fleet/run):
// requests by S3 API and the bytes both ways.
type Requests struct {
	// ByAPI counts requests by S3 API as MinIO names them: GetObject
	// (whole and ranged alike: MinIO does not tell them apart),
	// HeadObject, PutObject, ListObjectsV2, DeleteObject,
	// DeleteMultipleObjects, GetBucketLocation, ... Zero counts are left
	// out.
	ByAPI map[string]int64 `json:"by_api,omitempty"`
	// Errors counts the requests answered 4xx or 5xx (they are in ByAPI
	// too).
	Errors int64 `json:"errors,omitempty"`
	// SentBytes are the bytes the store sent (object bodies of GETs,
	// listings), ReceivedBytes those it received (object bodies of PUTs).
	SentBytes     int64 `json:"sent_bytes"`
	ReceivedBytes int64 `json:"received_bytes"`
}

// RequestKind is a class of request as object stores price them.
type RequestKind string

// The kinds of request. Public object stores price PUT, COPY, POST and
// LIST requests alike, GET and HEAD (and "all other requests") at a tenth
// or less of that, and DELETE not at all (Prices).
const (
	GET    RequestKind = "GET"
	HEAD   RequestKind = "HEAD"
	PUT    RequestKind = "PUT"
	LIST   RequestKind = "LIST"
	DELETE RequestKind = "DELETE"
	Other  RequestKind = "other"
)

// RequestKinds are the kinds in the order reports show them.
var RequestKinds = []RequestKind{GET, HEAD, PUT, LIST, DELETE, Other}

// KindOf classes an S3 API by MinIO's name for it: GetObject is a GET;
// HeadObject and HeadBucket are HEADs; PutObject, CopyObject, the
// multipart calls that upload, and bucket creation are PUTs; ListObjects*,
// ListBuckets and the multipart listings LISTs; DeleteObject,
// DeleteMultipleObjects, AbortMultipartUpload and DeleteBucket DELETEs;
// anything else (GetBucketLocation, ...) other.
func KindOf(api string) RequestKind {
	switch {
	case api == "GetObject":
		return GET
	case strings.HasPrefix(api, "Head"):
		return HEAD
	case strings.HasPrefix(api, "List"):
		return LIST
	case strings.HasPrefix(api, "Delete"), api == "AbortMultipartUpload":
		return DELETE
	case api == "PutObject", api == "CopyObject", api == "PutObjectPart", api == "CopyObjectPart",
		api == "NewMultipartUpload", api == "CompleteMultipartUpload", api == "PutBucket":
		return PUT
	}
	return Other
}

// Kind is the number of requests of kind k.
func (q Requests) Kind(k RequestKind) int64 {
	var n int64
	for api, c := range q.ByAPI {
		if KindOf(api) == k {
			n += c
		}
	}
	return n
}

// Total is the number of requests of every kind.
func (q Requests) Total() int64 {
	var n int64
	for _, c := range q.ByAPI {
		n += c
	}
	return n
}

// Bytes is the bytes moved both ways.
func (q Requests) Bytes() int64 { return q.SentBytes + q.ReceivedBytes }

// Add returns q + r.
func (q Requests) Add(r Requests) Requests {
	out := Requests{Errors: q.Errors + r.Errors, SentBytes: q.SentBytes + r.SentBytes, ReceivedBytes: q.ReceivedBytes + r.ReceivedBytes}
	if len(q.ByAPI)+len(r.ByAPI) > 0 {
		out.ByAPI = maps.Clone(q.ByAPI)
		if out.ByAPI == nil {
			out.ByAPI = map[string]int64{}
		}
		for api, c := range r.ByAPI {
			out.ByAPI[api] += c
		}
	}
	return out
}

// APIs lists the APIs of q in name order.
func (q Requests) APIs() []string { return slices.Sorted(maps.Keys(q.ByAPI)) }

// Sides is the object store's traffic split by the side that caused it:
// the workers while they memoized a submission, the SIG reader and the
// LIG reader while each read (fleet/run does one thing at a time).
type Sides struct {
	Worker    Requests `json:"worker"`
	SIGReader Requests `json:"sig_reader"`
	LIGReader Requests `json:"lig_reader"`
}

// Add returns s + t.
func (s Sides) Add(t Sides) Sides {
	return Sides{s.Worker.Add(t.Worker), s.SIGReader.Add(t.SIGReader), s.LIGReader.Add(t.LIGReader)}
}

// Store is the object store's traffic over a run, measured at the server
// (MinIO's own request counters, scraped before and after each phase as
// MinIO's CPU is read; fleet/run). Runs written before it was measured
// have none (Results.Store is nil).
type Store struct {
	// Source says how it was measured.
	Source string `json:"source"`
	// Sides sums the steps' phases.
	Sides
	// Whole is everything the store served from its start to the run's
	// end: the sides' and ingestion's, sigd's own and the moments between
	// phases.
	Whole Requests `json:"whole"`
	// Units and Examples are what each reader read (the same units both
	// ways), to give requests per unit.
	Units    int   `json:"units"`
	Examples int64 `json:"examples"`
	// Fit splits MinIO's CPU serving the readers between requests and
	// bytes (NewStoreFit).
	Fit StoreFit `json:"fit"`
	// Readers are the readers' own counts of their units' reads (nil in
	// runs from before they were taken).
	Readers *ReaderSides `json:"readers,omitempty"`
}

// ReaderSides are the SIG and the LIG reader's counts.
type ReaderSides struct {
	SIG ReaderCounts `json:"sig_reader"`
	LIG ReaderCounts `json:"lig_reader"`
}

// ReaderCounts are what a reader counted of its units' reads (its
// /metrics, scraped at the run's end; over every unit it read, the same
// units as Store.Units):
//   - WantedRaw and WantedMemo, the bytes of the segments the reads
//     wanted, of raw blocks and of memo objects
//     (reader.MetricObjectWantedBytes). The store's SentBytes are these
//     plus what read planning fetched beyond them (holes coalesced, tails
//     read whole): they are what any planning could reach at the run's
//     layout and encoding (Floor).
//   - Requests, the object store requests by "object/kind" (raw/tail,
//     memo/range, ...; reader.MetricObjectRequests), and Fetched the
//     bytes they asked for (reader.MetricObjectFetchedBytes).
//   - Footers, the footer cache's lookups by outcome (hit, miss, stale).
type ReaderCounts struct {
	WantedRaw  int64            `json:"wanted_raw_bytes"`
	WantedMemo int64            `json:"wanted_memo_bytes"`
	Requests   map[string]int64 `json:"requests,omitempty"`
	Fetched    map[string]int64 `json:"fetched_bytes,omitempty"`
	Footers    map[string]int64 `json:"footers,omitempty"`
}

// Wanted is the bytes the reads wanted.
func (c ReaderCounts) Wanted() int64 { return c.WantedRaw + c.WantedMemo }

// Floor is MinIO's CPU serving the SIG reader by the fit (modelled from
// measured figures), had its reads fetched only the bytes they wanted
// with perUnit requests a unit: the least a read planning reaches at the
// run's layout and encoding (0 without Readers).
func (s *Store) Floor(perUnit float64) float64 {
	if s.Readers == nil {
		return 0
	}
	return s.Fit.PerRequest*perUnit*float64(s.Units) + s.Fit.PerByte*float64(s.Readers.SIG.Wanted())
}

// PerUnit is the requests of q per unit read (0 without units).
func (s *Store) PerUnit(q Requests) float64 { return ratio(float64(q.Total()), float64(s.Units)) }

// NewStore sums the steps' traffic and fits MinIO's CPU to it.
func NewStore(source string, steps []Step, whole Requests) *Store {
	s := &Store{Source: source, Whole: whole}
	for _, st := range steps {
		if st.Store != nil {
			s.Sides = s.Sides.Add(*st.Store)
		}
		s.Units += st.Units
		s.Examples += st.Examples
	}
	s.Fit = NewStoreFit(steps)
	return s
}

// StoreFit is MinIO's CPU while a reader read, fitted to what it served:
// seconds = PerRequest x requests + PerByte x bytes (least squares
// through the origin over every reader phase of the run, SIG and LIG, as
// samples; coefficients held at 0 or above). A measured figure's split,
// not a measurement: it says whether requests or bytes bound MinIO's CPU
// for a side (Part). Over a run's phases requests and bytes rise together,
// so the split is weakly determined: bench/fleet-reads.txt moves them
// apart (the SIG reader's hole limit swept) and fits the same model there.
type StoreFit struct {
	// Samples is the reader phases fitted (with at least one request).
	Samples int `json:"samples"`
	// PerRequest is CPU seconds per request; PerByte per byte moved.
	PerRequest float64 `json:"per_request_seconds"`
	PerByte    float64 `json:"per_byte_seconds"`
	// R2 is the share of the phases' variance of MinIO CPU the fit
	// explains (1 - residual / total sum of squares about the mean).
	R2 float64 `json:"r2"`
}

// Part is the fit's split of the MinIO CPU of traffic q: the requests'
// and the bytes'.
func (f StoreFit) Part(q Requests) (requests, bytes float64) {
	return f.PerRequest * float64(q.Total()), f.PerByte * float64(q.Bytes())
}

// NewStoreFit fits MinIO's CPU in the reader phases of steps to their
// requests and bytes (StoreFit). The workers' phases are left out: PUTs
// cost a store more than GETs of the same bytes, and their phases also
// hold sigd's work.
func NewStoreFit(steps []Step) StoreFit {
	var xs [][2]float64
	var ys []float64
	for _, st := range steps {
		if st.Store == nil {
			continue
		}
		for _, p := range []struct {
			q   Requests
			cpu float64
		}{{st.Store.SIGReader, st.MinIOSIGSeconds}, {st.Store.LIGReader, st.MinIOLIGSeconds}} {
			if p.q.Total() > 0 {
				xs = append(xs, [2]float64{float64(p.q.Total()), float64(p.q.Bytes())})
				ys = append(ys, p.cpu)
			}
		}
	}
	f := StoreFit{Samples: len(ys)}
	if len(ys) == 0 {
		return f
	}
	var s11, s12, s22, s1y, s2y float64
	for i, x := range xs {
		s11, s12, s22 = s11+x[0]*x[0], s12+x[0]*x[1], s22+x[1]*x[1]
		s1y, s2y = s1y+x[0]*ys[i], s2y+x[1]*ys[i]
	}
	// The two-coefficient fit; where it gives one a negative value (the
	// two regressors nearly proportional), the better of the one-term
	// fits, each held at 0 or above.
	one := func(sxx, sxy float64) float64 {
		if sxx == 0 {
			return 0
		}
		return math.Max(0, sxy/sxx)
	}
	if det := s11*s22 - s12*s12; det > 0 {
		f.PerRequest, f.PerByte = (s22*s1y-s12*s2y)/det, (s11*s2y-s12*s1y)/det
	}
	if f.PerRequest < 0 || f.PerByte < 0 || (f.PerRequest == 0 && f.PerByte == 0) {
		a, b := StoreFit{PerRequest: one(s11, s1y)}, StoreFit{PerByte: one(s22, s2y)}
		if a.sse(xs, ys) <= b.sse(xs, ys) {
			f.PerRequest, f.PerByte = a.PerRequest, 0
		} else {
			f.PerRequest, f.PerByte = 0, b.PerByte
		}
	}
	var mean, tot float64
	for _, y := range ys {
		mean += y / float64(len(ys))
	}
	for _, y := range ys {
		tot += (y - mean) * (y - mean)
	}
	if tot > 0 {
		f.R2 = 1 - f.sse(xs, ys)/tot
	}
	return f
}

func (f StoreFit) sse(xs [][2]float64, ys []float64) float64 {
	var s float64
	for i, x := range xs {
		d := ys[i] - f.PerRequest*x[0] - f.PerByte*x[1]
		s += d * d
	}
	return s
}
