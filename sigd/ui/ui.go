package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/internal/units"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/steptime"
)

// The operator web UI: server-rendered HTML (html/template escapes every
// value: pipeline names, column names and DSL are user-supplied), no
// JavaScript, everything served from the binary. Operators log in with their
// operator token; the session is an HttpOnly, SameSite=Strict cookie, and
// every state-changing form carries the session's CSRF token.

//go:embed web
var webFS embed.FS

var tmpl = template.Must(template.New("ui").Funcs(template.FuncMap{
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"short": func(k any) string { s := fmt.Sprint(k); return s[:min(12, len(s))] }, // hex, or a canon.Key
	"join":  func(xs []string) string { return strings.Join(xs, ", ") },
	"bytes": units.Bytes,
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
}).ParseFS(webFS, "web/templates.html"))

// Config wires the UI to the daemon.
type Config struct {
	Frontend *matching.Frontend
	Evictor  *eviction.Evictor
	Tokens   *auth.Tokens
	// Stats, Quarantine, Release, Bans, LiftBan and Trainers come from
	// sigd.
	Stats      func() (*sigv1.StatsResponse, error)
	Quarantine func() []*sigv1.QuarantinedTask
	Release    func(component, block string) (bool, error)
	// Bans lists the worker builds refused leases; LiftBan lifts one for
	// the operator who (issue 27). Nil: the UI shows none and lifts none.
	Bans     func() []*sigv1.WorkerBuildBan
	LiftBan  func(who, build string) (bool, error)
	Trainers func() []*sigv1.TrainerStatus
	// Explain says why a pipeline's entries are not ready (sigd's
	// ExplainPending); SetPriority sets a pipeline's priority as
	// set-priority does, for the operator who (issue 30's trainer page).
	Explain     func(client, pipeline string) (*sigv1.ExplainPendingResponse, error)
	SetPriority func(who, client, pipeline string, priority int32) (int, error)
	// QueuedPeak returns the most distinct tasks queued at once since its
	// previous call (workers.Queue.QueuedPeak); the queue chart samples it.
	// Nil samples the queues' depth at each sample instead.
	QueuedPeak func() int
	Clock      clock.Clock
	// SecureCookies sets the Secure flag (serve the UI over HTTPS).
	SecureCookies bool
	// SessionTTL bounds a session. Default 12h.
	SessionTTL time.Duration
	// ReportsDir holds the bench reports shown under /ui/reports
	// (reports.go); empty: none.
	ReportsDir string
	// SampleEvery is the period of the overview's charts. Default 5s.
	SampleEvery time.Duration
	// Sample gives what the charts sample (block hit rate, workers,
	// queues) without what only Stats's other figures cost (sigd: the walk
	// of the whole cache for the reuse figures). Nil: Stats.
	Sample func() (*sigv1.StatsResponse, error)
	Log    *slog.Logger
}

// UI serves the operator web UI under /ui/.
type UI struct {
	cfg      Config
	mu       sync.Mutex
	sessions map[string]*session
	samples  []sample
}

type session struct {
	p       auth.Principal
	csrf    string
	expires time.Time
}

type sample struct {
	at      time.Time
	hitRate float64
	queued  float64
	workers float64
	mpg     map[string]float64
}

const (
	sessionCookie = "sig_session"
	loginCookie   = "sig_login"
	maxForm       = 64 << 10
	maxSamples    = 720
)

// New returns the UI.
func New(cfg Config) *UI {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &UI{cfg: cfg, sessions: map[string]*session{}}
}

// Handler returns the UI's routes, to mount at /ui/.
func (u *UI) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/static/style.css", u.static)
	mux.HandleFunc("GET /ui/login", u.loginPage)
	mux.HandleFunc("POST /ui/login", u.login)
	mux.HandleFunc("POST /ui/logout", u.operator(u.logout))
	mux.HandleFunc("GET /ui/{$}", u.operator(u.overview))
	mux.HandleFunc("GET /ui/search", u.operator(u.search))
	mux.HandleFunc("GET /ui/component/{key}", u.operator(u.component))
	mux.HandleFunc("GET /ui/evict", u.operator(u.evictPage))
	mux.HandleFunc("POST /ui/evict/dry-run", u.operator(u.dryRun))
	mux.HandleFunc("POST /ui/evict/confirm", u.operator(u.confirm))
	mux.HandleFunc("POST /ui/quarantine/release", u.operator(u.release))
	mux.HandleFunc("POST /ui/builds/lift", u.operator(u.liftBan))
	mux.HandleFunc("POST /ui/block", u.operator(u.block))
	mux.HandleFunc("GET /ui/audit", u.operator(u.audit))
	mux.HandleFunc("GET /ui/trainer/{client}/{job}", u.operator(u.trainer))
	mux.HandleFunc("POST /ui/priority", u.operator(u.setPriority))
	mux.HandleFunc("GET /ui/reports", u.operator(u.reports))
	mux.HandleFunc("GET /ui/reports/{name}", u.operator(u.reportPage))
	return securityHeaders(mux)
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func (u *UI) static(w http.ResponseWriter, r *http.Request) {
	b, _ := webFS.ReadFile("web/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Write(b)
}

// page is what every template gets.
type page struct {
	Title, User, CSRF, Error, Notice string
	Refresh                          int
	Data                             any
}

func (u *UI) render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := tmpl.ExecuteTemplate(w, name, p); err != nil {
		u.cfg.Log.Warn("ui: render", "template", name, "err", err)
	}
}

func (u *UI) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/ui/", HttpOnly: true, Secure: u.cfg.SecureCookies,
		SameSite: http.SameSiteStrictMode, MaxAge: maxAge})
}

// loginPage uses a double-submit token (cookie and form field) so that a
// login form cannot be posted from another site (login CSRF).
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	tok := randid.Hex(32)
	u.setCookie(w, loginCookie, tok, 600)
	u.render(w, http.StatusOK, "login", page{Title: "Log in", CSRF: tok})
}

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		u.render(w, http.StatusBadRequest, "error", page{Title: "Bad request"})
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(c.Value, r.PostFormValue("csrf")) {
		u.render(w, http.StatusForbidden, "error", page{Title: "Forbidden: invalid or missing CSRF token"})
		return
	}
	p, ok := u.cfg.Tokens.Lookup(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		tok := randid.Hex(32)
		u.setCookie(w, loginCookie, tok, 600)
		u.render(w, http.StatusUnauthorized, "login", page{Title: "Log in", CSRF: tok, Error: "Unknown token."})
		return
	}
	if !p.IsOperator() {
		u.render(w, http.StatusForbidden, "error", page{Title: "Forbidden: the web UI is for operators"})
		return
	}
	id := randid.Hex(32)
	u.mu.Lock()
	u.gcSessions()
	u.sessions[id] = &session{p: p, csrf: randid.Hex(32), expires: u.cfg.Clock.Now().Add(u.cfg.SessionTTL)}
	u.mu.Unlock()
	u.setCookie(w, sessionCookie, id, int(u.cfg.SessionTTL.Seconds()))
	u.setCookie(w, loginCookie, "", -1)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (u *UI) gcSessions() {
	now := u.cfg.Clock.Now()
	for id, s := range u.sessions {
		if now.After(s.expires) {
			delete(u.sessions, id)
		}
	}
}

// operator wraps a handler: it needs an operator session, and POSTs need
// the session's CSRF token.
func (u *UI) operator(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		var s *session
		if err == nil {
			u.mu.Lock()
			s = u.sessions[c.Value]
			if s != nil && u.cfg.Clock.Now().After(s.expires) {
				delete(u.sessions, c.Value)
				s = nil
			}
			u.mu.Unlock()
		}
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
				return
			}
			u.render(w, http.StatusForbidden, "error", page{Title: "Forbidden: log in first"})
			return
		}
		if !s.p.IsOperator() {
			u.render(w, http.StatusForbidden, "error", page{Title: "Forbidden: the web UI is for operators"})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := r.ParseForm(); err != nil {
				u.render(w, http.StatusBadRequest, "error", page{Title: "Bad request: form too large or malformed"})
				return
			}
			if !sameToken(s.csrf, r.PostFormValue("csrf")) {
				u.render(w, http.StatusForbidden, "error", page{Title: "Forbidden: invalid or missing CSRF token"})
				return
			}
		}
		h(w, r, s)
	}
}

func (u *UI) base(s *session, title string) page {
	return page{Title: title, User: s.p.Name, CSRF: s.csrf}
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		u.mu.Lock()
		delete(u.sessions, c.Value)
		u.mu.Unlock()
	}
	u.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// ---------------------------------------------------------- overview

type trainerRow struct {
	Status *sigv1.TrainerStatus
	Chart  template.HTML // the job's MPG over time
	// PGWhy says why the job's PG is what it is, from its step times.
	PGWhy string
}

type overviewData struct {
	Stats      *sigv1.StatsResponse
	Quarantine []*sigv1.QuarantinedTask
	// Bans are the worker builds refused leases (issue 27).
	Bans        []*sigv1.WorkerBuildBan
	Trainers    []trainerRow
	HitChart    template.HTML
	QueueChart  template.HTML
	SampleEvery time.Duration
}

func (u *UI) overview(w http.ResponseWriter, r *http.Request, s *session) {
	p := u.base(s, "Overview")
	p.Refresh = 10
	st, err := u.cfg.Stats()
	if err != nil {
		p.Error = err.Error()
		st = &sigv1.StatsResponse{}
	}
	d := overviewData{Stats: st, Quarantine: u.cfg.Quarantine(), SampleEvery: u.cfg.SampleEvery}
	if u.cfg.Bans != nil {
		d.Bans = u.cfg.Bans()
	}
	d.HitChart, d.QueueChart = u.charts()
	for _, t := range u.cfg.Trainers() {
		d.Trainers = append(d.Trainers, trainerRow{Status: t, Chart: u.mpgChart(t.Client + "/" + t.Job),
			PGWhy: steptime.ExplainProgramGoodput(t.ProgramGoodput, t.TensorcoreNsPerStep, t.SparsecoreNsPerStep, t.DeviceNsPerStep)})
	}
	p.Data = d
	u.render(w, http.StatusOK, "overview", p)
}

// series returns the sampled series: their times and a function giving
// one series' values.
func (u *UI) series() ([]time.Time, func(func(sample) float64) []float64) {
	u.mu.Lock()
	samples := append([]sample(nil), u.samples...)
	u.mu.Unlock()
	times := make([]time.Time, len(samples))
	for i, s := range samples {
		times[i] = s.at
	}
	return times, func(f func(sample) float64) []float64 {
		out := make([]float64, len(samples))
		for i, s := range samples {
			out[i] = f(s)
		}
		return out
	}
}

// charts draws the block hit rate and the queue over time.
func (u *UI) charts() (hit, queue template.HTML) {
	times, values := u.series()
	hit = renderChart(chartSpec{Title: "block hit rate over time", Unit: "hit rate", Percent: true, YMax: 1, Times: times,
		Series: []chartSeries{{Name: "block hit rate since start", Class: "s0", Values: values(func(s sample) float64 { return s.hitRate })}}})
	queue = renderChart(chartSpec{Title: "queued tasks and workers over time", Unit: "tasks, workers", Integer: true, Times: times,
		Series: []chartSeries{
			{Name: "queued tasks (most at once per " + u.cfg.SampleEvery.String() + ")", Class: "s0", Values: values(func(s sample) float64 { return s.queued })},
			{Name: "workers", Class: "s1", Values: values(func(s sample) float64 { return s.workers })},
		}})
	return hit, queue
}

// mpgChart draws a trainer job's MPG over time, on an axis scaled to it.
func (u *UI) mpgChart(job string) template.HTML {
	times, values := u.series()
	return renderChart(chartSpec{Title: "MPG of job " + job + " over time", Unit: "MPG (job)", Percent: true, Times: times,
		Series: []chartSeries{{Name: job + " MPG", Class: "s0", Values: values(func(s sample) float64 {
			if v, ok := s.mpg[job]; ok {
				return v
			}
			return math.NaN() // not reporting then
		})}}})
}

// Run samples the overview's series until ctx ends.
func (u *UI) Run(ctx context.Context) error {
	for {
		u.sample()
		select {
		case <-ctx.Done():
			return nil
		case <-u.cfg.Clock.After(u.cfg.SampleEvery):
		}
	}
}

func (u *UI) sample() {
	stats := u.cfg.Sample
	if stats == nil {
		stats = u.cfg.Stats
	}
	st, err := stats()
	if err != nil {
		return
	}
	s := sample{at: u.cfg.Clock.Now(), hitRate: st.BlockHitRate, workers: float64(st.WorkersActual), mpg: map[string]float64{}}
	if u.cfg.QueuedPeak != nil {
		// The most tasks queued at once since the last sample: a burst
		// that is queued and drained between two samples still shows.
		s.queued = float64(u.cfg.QueuedPeak())
	} else {
		for _, q := range st.Queues {
			s.queued += float64(q.Queued)
		}
	}
	for _, t := range u.cfg.Trainers() {
		s.mpg[t.Client+"/"+t.Job] = t.Mpg
	}
	u.mu.Lock()
	u.samples = append(u.samples, s)
	if len(u.samples) > maxSamples {
		u.samples = append(u.samples[:0], u.samples[len(u.samples)-maxSamples:]...)
	}
	u.mu.Unlock()
}

// ---------------------------------------------------------- search

type searchData struct {
	Q        matching.Query
	Searched bool
	Results  []matching.ComponentInfo
	Next     string
	NextURL  string
}

func (u *UI) search(w http.ResponseWriter, r *http.Request, s *session) {
	p := u.base(s, "Search")
	v := r.URL.Query()
	q := matching.Query{Subgraph: v.Get("subgraph"), Column: v.Get("column"), Op: v.Get("op"), Client: v.Get("client"),
		Pipeline: v.Get("pipeline"), KeyPrefix: v.Get("prefix"), After: v.Get("after"), Limit: 50}
	d := searchData{Q: q}
	if len(r.URL.RawQuery) > 0 {
		d.Searched = true
		res, next, err := u.cfg.Frontend.Search(q)
		if err != nil {
			p.Error = err.Error()
		}
		d.Results, d.Next = res, next
		if next != "" {
			v.Set("after", next)
			d.NextURL = "/ui/search?" + v.Encode()
		}
	}
	p.Data = d
	u.render(w, http.StatusOK, "search", p)
}

// ---------------------------------------------------------- component

type componentData struct {
	Info        matching.ComponentInfo
	Blocks      []matching.MemoEntry
	ContainedBy []string
	Contains    []string
	// Mismatches are the value mismatches of the readers' guard sigd
	// confirmed and quarantined for this component since it started
	// (eviction.Evictor.Mismatches).
	Mismatches int64
}

func (u *UI) component(w http.ResponseWriter, r *http.Request, s *session) {
	k, err := canon.ParseKey(r.PathValue("key"))
	if err != nil {
		u.render(w, http.StatusNotFound, "error", u.base(s, "No such component"))
		return
	}
	info, err := u.cfg.Frontend.Info(k)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, matching.ErrNotFound) {
			status = http.StatusNotFound
		}
		u.render(w, status, "error", u.base(s, "No such component"))
		return
	}
	p := u.base(s, "Component "+k.Short())
	d := componentData{Info: info, Mismatches: u.cfg.Evictor.Mismatches()[k]}
	memos, err := u.cfg.Frontend.Cache().Memos(k)
	if err != nil {
		p.Error = err.Error()
	}
	for _, m := range memos {
		d.Blocks = append(d.Blocks, m)
	}
	sort.Slice(d.Blocks, func(i, j int) bool { return d.Blocks[i].Block.Compare(d.Blocks[j].Block) < 0 })
	by, contains, err := u.cfg.Frontend.Related(k)
	if err != nil {
		p.Error = err.Error()
	}
	for _, c := range by {
		d.ContainedBy = append(d.ContainedBy, c.String())
	}
	for _, c := range contains {
		d.Contains = append(d.Contains, c.String())
	}
	p.Data = d
	u.render(w, http.StatusOK, "component", p)
}

// ---------------------------------------------------------- eviction

type evictForm struct {
	Subgraph, NodeKey string
}

type impactData struct {
	Subgraph, NodeKey string
	Target            string
	Impact            eviction.Impact
	Done              bool
}

func (u *UI) evictPage(w http.ResponseWriter, r *http.Request, s *session) {
	p := u.base(s, "Evict")
	p.Data = evictForm{Subgraph: r.URL.Query().Get("subgraph"), NodeKey: r.URL.Query().Get("node_key")}
	u.render(w, http.StatusOK, "evict", p)
}

func (u *UI) target(r *http.Request) eviction.Target {
	return eviction.Target{Subgraph: strings.TrimSpace(r.PostFormValue("subgraph")), NodeKey: strings.TrimSpace(r.PostFormValue("node_key"))}
}

func (u *UI) impactPage(w http.ResponseWriter, status int, s *session, t eviction.Target, im eviction.Impact, done bool, notice, errMsg string) {
	p := u.base(s, "Eviction")
	p.Notice, p.Error = notice, errMsg
	p.Data = impactData{Subgraph: t.Subgraph, NodeKey: t.NodeKey, Target: t.String(), Impact: im, Done: done}
	u.render(w, status, "impact", p)
}

func (u *UI) dryRun(w http.ResponseWriter, r *http.Request, s *session) {
	t := u.target(r)
	im, err := u.cfg.Evictor.Plan(t)
	if err != nil {
		p := u.base(s, "Evict")
		p.Error = err.Error()
		p.Data = evictForm{Subgraph: t.Subgraph, NodeKey: t.NodeKey}
		u.render(w, http.StatusBadRequest, "evict", p)
		return
	}
	u.impactPage(w, http.StatusOK, s, t, im, false, "", "")
}

func (u *UI) confirm(w http.ResponseWriter, r *http.Request, s *session) {
	t := u.target(r)
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		im, err := u.cfg.Evictor.Plan(t)
		if err != nil {
			u.render(w, http.StatusBadRequest, "error", u.base(s, "Bad request: "+err.Error()))
			return
		}
		u.impactPage(w, http.StatusBadRequest, s, t, im, false, "", "A reason is required: it is recorded in the audit log.")
		return
	}
	im, err := u.cfg.Evictor.Evict(r.Context(), t, s.p.Name, reason)
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Eviction failed: "+err.Error()))
		return
	}
	u.impactPage(w, http.StatusOK, s, t, im, true, fmt.Sprintf("Evicted %d blocks of %d components.", im.Blocks, len(im.Components)), "")
}

func (u *UI) release(w http.ResponseWriter, r *http.Request, s *session) {
	ok, err := u.cfg.Release(r.PostFormValue("component"), r.PostFormValue("block"))
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Release failed: "+err.Error()))
		return
	}
	u.cfg.Log.Info("ui: quarantine release", "who", s.p.Name, "component", r.PostFormValue("component"), "block", r.PostFormValue("block"), "released", ok)
	http.Redirect(w, r, "/ui/?"+url.Values{"released": {fmt.Sprint(ok)}}.Encode(), http.StatusSeeOther)
}

// liftBan lifts the ban of a worker build (issue 27): the operator found
// the cause (a misbuilt binary replaced, or the build innocent). It is
// audited under the operator's name.
func (u *UI) liftBan(w http.ResponseWriter, r *http.Request, s *session) {
	build := r.PostFormValue("build")
	if u.cfg.LiftBan == nil {
		u.render(w, http.StatusNotFound, "error", u.base(s, "Lifting bans is not available"))
		return
	}
	ok, err := u.cfg.LiftBan(s.p.Name, build)
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Lifting the ban failed: "+err.Error()))
		return
	}
	u.cfg.Log.Info("ui: worker build ban lifted", "who", s.p.Name, "build", build, "lifted", ok)
	http.Redirect(w, r, "/ui/?"+url.Values{"lifted": {fmt.Sprint(ok)}}.Encode(), http.StatusSeeOther)
}

func (u *UI) audit(w http.ResponseWriter, r *http.Request, s *session) {
	p := u.base(s, "Audit")
	es, err := u.cfg.Frontend.Cache().Audit(200)
	if err != nil {
		p.Error = err.Error()
	}
	p.Data = es
	u.render(w, http.StatusOK, "audit", p)
}
