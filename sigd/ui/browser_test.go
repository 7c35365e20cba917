package ui_test

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/report"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// chromiumPath is Debian's chromium (make deps installs it).
const chromiumPath = "/usr/bin/chromium"

// artifacts returns the directory for this package's test artifacts:
// $SIG_TEST_ARTIFACTS/ui, else testartifacts/ui at the repository root.
func artifacts(t *testing.T) string {
	t.Helper()
	root := os.Getenv("SIG_TEST_ARTIFACTS")
	if root == "" {
		r, err := devenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		root = filepath.Join(r, "testartifacts")
	}
	dir := filepath.Join(root, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newChromium starts a headless Chromium with a fresh profile and nothing
// that talks to the network on its own (the test machines have none).
func newChromium(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		p, lerr := exec.LookPath("chromium")
		if lerr != nil {
			t.Fatalf("chromium not found at %s or on PATH: run make deps", chromiumPath)
		}
		path = p
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	// The first call starts the browser, which lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium (%s): %v: run make deps", path, err)
	}
	return ctx
}

// TestBrowserEvictSubgraph is the operator's path through the web UI in a
// real browser: log in, search components by subgraph, open one, dry-run
// and confirm the eviction of the subgraph; then the objects are gone from
// MinIO and the affected read solution is pending; workers recompute it,
// and the component page shows every block ready again. A screenshot of
// each page is saved as a test artifact.
func TestBrowserEvictSubgraph(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{})
	e.Pipelines()
	ctrSol, cvrSol := e.Solution("ctr", "ctr-small"), e.Solution("cvr", evictiontest.XSSPipeline)
	qa, qids, price := sigdtest.InputKey(t, ctrSol, "qa_overlap"), sigdtest.InputKey(t, ctrSol, "query_ids"), sigdtest.InputKey(t, ctrSol, "price_bin")
	qsmall := sigdtest.InputKey(t, cvrSol, "q_small")
	affected := []canon.Key{qa, qids, qsmall}

	bctx := newChromium(t)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	dir := artifacts(t)
	base := "http://" + e.Srv.HTTPAddr()
	fail := func(what string, err error) {
		t.Helper()
		loc, _ := chromedp.Run(bctx, chromedp.Location())
		t.Fatalf("%s: %v (at %s)", what, err, loc)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			fail(what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			fail("text of "+sel, err)
		}
		return strings.TrimSpace(s)
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		if err != nil {
			fail("count "+sel, err)
		}
		return n
	}
	shot := func(name string) {
		t.Helper()
		// The CSP (style-src 'self') blocks inline styles: a page relying on
		// one renders wrong in every browser.
		if n := count("[style]"); n != 0 {
			t.Errorf("%s: %d elements with inline styles, which the CSP blocks", name, n)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			fail("screenshot "+name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Log in.
	do("login page", chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")))
	shot("01-login.png")
	do("log in", chromedp.SendKeys(chromedp.ID("token"), e.Srv.Tokens[evictiontest.Operator]), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("hit-rate")))
	shot("02-overview.png")
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || !strings.HasPrefix(title, "Overview") {
		t.Errorf("after login the title is %q (%v)", title, err)
	}

	// Search by subgraph.
	do("search", chromedp.Navigate(base+"/ui/search"), chromedp.WaitVisible(chromedp.ID("subgraph")),
		chromedp.SendKeys(chromedp.ID("subgraph"), evictiontest.FaultySubgraph), chromedp.Click(chromedp.CSS(`#search-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("results")))
	shot("03-search.png")
	if n := count("#results a.component-link"); n != len(affected) {
		t.Errorf("search found %d components, want %d", n, len(affected))
	}
	// The pipeline named like a script is shown as text, and is no script.
	if txt, n := text("#results"), count("script"); !strings.Contains(txt, evictiontest.XSSPipeline) || n != 0 {
		t.Errorf("results text %q, %d script elements", txt, n)
	}

	// Open a component.
	do("open a component", chromedp.Click(chromedp.CSS("#results a.component-link")), chromedp.WaitVisible(chromedp.ID("component-key")))
	shot("04-component.png")
	key, pipes := text("#component-key"), text("#pipelines")
	opened, err := canon.ParseKey(key)
	if err != nil {
		t.Fatalf("component page key %q: %v", key, err)
	}
	if !slices.Contains(affected, opened) || !strings.Contains(pipes, "/") {
		t.Errorf("opened component %s (pipelines %q), not one of the search results", key, pipes)
	}

	// Dry run, then confirm.
	do("dry run", chromedp.Navigate(base+"/ui/search?"+url.Values{"subgraph": {evictiontest.FaultySubgraph}}.Encode()),
		chromedp.WaitVisible(chromedp.ID("evict-subgraph-link")),
		chromedp.Click(chromedp.ID("evict-subgraph-link")), chromedp.WaitVisible(chromedp.ID("dry-run-form")))
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("evict-subgraph"))); err != nil || v != evictiontest.FaultySubgraph {
		t.Errorf("the eviction form holds %q (%v), want the searched subgraph", v, err)
	}
	do("dry run", chromedp.Click(chromedp.ID("dry-run")), chromedp.WaitVisible(chromedp.ID("confirm-form")))
	shot("05-dry-run.png")
	if c, b := text("#impact-components"), text("#impact-blocks"); c != "3" || b != "9" {
		t.Errorf("dry run: %s components, %s blocks; want 3 and 9", c, b)
	}
	for _, k := range affected {
		e.CheckMemoized(k) // a dry run changes nothing
	}
	do("confirm", chromedp.SendKeys(chromedp.ID("reason"), "tokenizer bug: lower() dropped accents"),
		chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("audit-id")))
	shot("06-evicted.png")
	if id, notice := text("#audit-id"), text("#notice"); id == "" || !strings.Contains(notice, "Evicted 9 blocks of 3 components") {
		t.Errorf("after confirming: audit id %q, notice %q", id, notice)
	}

	// The objects are gone from MinIO, the read solution is pending.
	for _, k := range affected {
		e.CheckEvicted(k)
	}
	e.CheckMemoized(price)
	sol := e.Solution("ctr", "ctr-small")
	if sol.Complete || evictiontest.PendingBlocks(sol, qa, qids) != 2*len(e.Blocks) {
		t.Errorf("ctr solution after eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	do("audit", chromedp.Navigate(base+"/ui/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	shot("07-audit.png")
	if a := text("#audit"); !strings.Contains(a, "tokenizer bug") || !strings.Contains(a, evictiontest.Operator) {
		t.Errorf("audit page: %q", a)
	}

	// Workers recompute; the component page shows every block ready.
	e.Solution("cvr", evictiontest.XSSPipeline)
	e.WaitComplete("ctr", "ctr-small")
	e.WaitComplete("cvr", evictiontest.XSSPipeline)
	do("recomputed", chromedp.Navigate(base+"/ui/component/"+opened.String()), chromedp.WaitVisible(chromedp.ID("blocks")))
	shot("08-recomputed.png")
	if n := count("#blocks td.state-ready"); n != len(e.Blocks) {
		t.Errorf("component page after recomputation: %d ready blocks, want %d", n, len(e.Blocks))
	}
	for _, k := range affected {
		e.CheckMemoized(k)
	}
}

// chartInfo is what the browser shows of one chart.
type chartInfo struct {
	Card         string   `json:"card"`
	Unit         string   `json:"unit"`
	YTicks       []string `json:"yTicks"`
	XTicks       []string `json:"xTicks"`
	Axes         int      `json:"axes"`
	Lines        int      `json:"lines"`
	Titles       []string `json:"titles"`
	Caption      string   `json:"caption"`
	Width        float64  `json:"width"`
	Height       float64  `json:"height"`
	OverPlot     []string `json:"overPlot"`
	FontPx       float64  `json:"fontPx"`
	InlineStyles int      `json:"inlineStyles"`
}

// chartsJS describes every chart of the page: its unit and tick labels,
// axes, lines, hover titles, caption, rendered size, the labels whose box
// reaches into the plot area (where the lines are), and the rendered size
// of its tick labels.
const chartsJS = `[...document.querySelectorAll('figure.chart')].map(f => {
  const s = f.querySelector('svg'), r = s.getBoundingClientRect();
  const ax = s.querySelectorAll('line.axis');
  const x0 = +ax[0].getAttribute('x1'), top = +ax[0].getAttribute('y1'), bottom = +ax[0].getAttribute('y2'), x1 = +ax[1].getAttribute('x2');
  const texts = [...s.querySelectorAll('text')];
  const tick = s.querySelector('text.tick');
  return {
    card: f.closest('.card').id || f.closest('.card').className,
    unit: s.querySelector('text.unit').textContent,
    yTicks: [...s.querySelectorAll('text.tick.y')].map(x => x.textContent),
    xTicks: [...s.querySelectorAll('text.tick.x')].map(x => x.textContent),
    axes: ax.length,
    lines: s.querySelectorAll('.line').length,
    titles: [...s.querySelectorAll('rect.hover > title')].map(x => x.textContent),
    caption: f.querySelector('figcaption').textContent,
    width: r.width, height: r.height,
    overPlot: texts.filter(t => { const b = t.getBBox(); return b.x < x1 && b.x + b.width > x0 && b.y < bottom && b.y + b.height > top; }).map(t => t.textContent),
    fontPx: tick ? tick.getBoundingClientRect().height : 0,
    inlineStyles: f.querySelectorAll('[style]').length,
  };
})`

var (
	clockRE   = regexp.MustCompile(`^\d\d:\d\d(:\d\d)?$`)
	hoverRE   = regexp.MustCompile(`^\d\d:\d\d:\d\d UTC(\n[^\n]+: ([0-9.]+%?|–))+$`)
	captionRE = regexp.MustCompile(`now [0-9.]+%?, max ([0-9.]+)%? at \d\d:\d\d:\d\d`)
)

// TestBrowserOverviewCharts: in a real browser, every chart of the overview
// has axes with their units, tick values and wall-clock times, a hover
// title with each sample's time and values, and its series' current and
// largest values beside it; no label reaches into the plot area where the
// lines are, and the drawing keeps its aspect ratio. The queue chart shows
// the tasks the submissions queued; a job's MPG of 4.6% is drawn on an
// axis scaled to it; the trainers table says each figure is the job's, and
// why the job's PG is what it is.
func TestBrowserOverviewCharts(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{Blocks: 2, Rows: 100, UISampleEvery: 100 * time.Millisecond})
	report := func(mpg float64) {
		t.Helper()
		if _, err := e.SIG("trainer").ReportTrainerStatus(e.Ctx, &sigv1.TrainerStatus{Client: "ctr", Job: "train", Pipeline: "ctr-small",
			Phase: "initial", Chips: 4, SchedulingGoodput: 1, RuntimeGoodput: 0.98, ProgramGoodput: mpg / 0.98, Mpg: mpg, Steps: 10,
			TensorcoreNsPerStep: 2.8, SparsecoreNsPerStep: 57, DeviceNsPerStep: 59.8}); err != nil {
			t.Fatal(err)
		}
	}
	report(0.044)
	e.Pipelines()
	report(0.046)
	time.Sleep(500 * time.Millisecond) // samples after the report

	bctx := newChromium(t)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	base := "http://" + e.Srv.HTTPAddr()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), e.Srv.Tokens[evictiontest.Operator]), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("queue-chart"))); err != nil {
		t.Fatalf("log in: %v", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(t), "09-overview-charts.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartInfo](chartsJS))
	if err != nil {
		t.Fatal(err)
	}
	byCard := map[string]chartInfo{}
	for _, c := range charts {
		byCard[c.Card] = c
		t.Run(c.Card, func(t *testing.T) {
			if c.Unit == "" || c.Axes < 2 || c.Lines == 0 || len(c.YTicks) < 2 || len(c.XTicks) < 1 {
				t.Errorf("unit %q, %d axes, %d lines, y ticks %q, time ticks %q", c.Unit, c.Axes, c.Lines, c.YTicks, c.XTicks)
			}
			for _, x := range c.XTicks {
				if !clockRE.MatchString(x) {
					t.Errorf("time tick %q is not a wall-clock time", x)
				}
			}
			if len(c.Titles) < 3 {
				t.Errorf("%d hover titles", len(c.Titles))
			}
			for _, h := range c.Titles {
				if !hoverRE.MatchString(h) {
					t.Errorf("hover title %q has no time and values", h)
					break
				}
			}
			if n := len(c.Titles); n > 0 && strings.Contains(c.Titles[n-1], "–") {
				t.Errorf("the last sample's hover title %q has no value", c.Titles[n-1])
			}
			if !captionRE.MatchString(c.Caption) {
				t.Errorf("caption %q has no current and largest value", c.Caption)
			}
			if len(c.OverPlot) > 0 {
				t.Errorf("labels %q are drawn over the plot area", c.OverPlot)
			}
			if r := c.Width / c.Height; math.Abs(r-560.0/180) > 0.02 {
				t.Errorf("drawn %gx%g: the aspect ratio is not kept", c.Width, c.Height)
			}
			if c.FontPx < 8 {
				t.Errorf("tick labels are %gpx high", c.FontPx)
			}
			if c.InlineStyles != 0 {
				t.Errorf("%d inline styles, which the CSP blocks", c.InlineStyles)
			}
		})
	}
	if len(charts) != 3 {
		t.Fatalf("%d charts on the overview, want hit rate, queue and one job's MPG", len(charts))
	}
	q := byCard["queue-chart"]
	if m := captionRE.FindStringSubmatch(q.Caption); m == nil || m[1] == "0" {
		t.Errorf("the queue chart's caption %q shows no queued task, after three pipelines queued theirs", q.Caption)
	}
	mpg := byCard["card mpg-chart"]
	top := mpg.YTicks[len(mpg.YTicks)-1]
	if v, err := strconv.ParseFloat(strings.TrimSuffix(top, "%"), 64); err != nil || v < 4.6 || v > 10 {
		t.Errorf("an MPG of 4.6%% is drawn on an axis up to %s", top)
	}
	head, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#trainers tr")))
	if err != nil {
		t.Fatal(err)
	}
	scope, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("goodput-scope")))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"SG (job)", "RG (job)", "PG (job)", "MPG (job)"} {
		if !strings.Contains(strings.ReplaceAll(head, "\t", " "), strings.ToUpper(h)) && !strings.Contains(head, h) {
			t.Errorf("trainers table header %q has no %q", head, h)
		}
	}
	if !strings.Contains(scope, "SG (fleet)") || !strings.Contains(scope, "job's own") {
		t.Errorf("the trainers table does not say which scope its figures are: %q", scope)
	}
	// Why the job's PG is 4.7 %: its steps' ideal is 2.8 ns of 59.8 ns.
	why, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("p.pg-why")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(why, "ctr/train: PG 0.047 = 2.8 ns ideal") || !strings.Contains(why, "SparseCore's embedding lookups take 57 ns") {
		t.Errorf("the overview does not say why PG is 4.7%%: %q", why)
	}
}

// reportFixtures copies the report package's fixtures into dir.
func reportFixtures(t *testing.T, dir string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "all", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// plotInfo is what the browser drew of one of a report's plots.
type plotInfo struct {
	ID, Kind     string
	Width        float64
	Height       float64
	Texts        int
	InlineStyles int
}

const plotsJS = `[...document.querySelectorAll('figure.plot')].map(f => {
	const svg = f.querySelector('svg'); const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
	return {ID: f.id, Kind: (f.querySelector('p.kind strong') || {}).textContent || '', Width: r.width, Height: r.height,
		Texts: svg ? svg.querySelectorAll('text').length : 0, InlineStyles: f.querySelectorAll('[style], style').length};
})`

// TestBrowserReports: the web UI serves the bench reports of sigd's
// --reports directory behind the operator login: the list shows each
// directory holding bench files (its name escaped), a report page draws
// every plot of package report's report of it, each marked measured or
// modelled, with no inline style or script; a missing input says which
// command writes it; malformed inputs show an error naming the file and
// field; a URL outside the list is not found.
func TestBrowserReports(t *testing.T) {
	root := t.TempDir()
	reportFixtures(t, filepath.Join(root, "nightly"), "fleet-run.json", "scale.json", "fleet.json", "preemption.json", "embeddings.json")
	reportFixtures(t, filepath.Join(root, `<b>odd&"x`), "scale.json")
	if err := os.MkdirAll(filepath.Join(root, "bad"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bad", "scale.json"), []byte(`{"schema": "sig.scale/v1", "points": [{"components": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	want, err := report.Build(filepath.Join(root, "nightly"))
	if err != nil {
		t.Fatal(err)
	}
	e := evictiontest.New(t, evictiontest.Config{Blocks: 1, Rows: 100, ReportsDir: root})
	base := "http://" + e.Srv.HTTPAddr()

	// Without a session the reports redirect to the login.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/ui/reports", "/ui/reports/nightly"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s without a session: %s to %q", path, resp.Status, resp.Header.Get("Location"))
		}
	}

	bctx := newChromium(t)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), e.Srv.Tokens[evictiontest.Operator]), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("queue-chart")),
		chromedp.Click(chromedp.CSS(`header a[href="/ui/reports"]`)), chromedp.WaitVisible(chromedp.ID("reports"))); err != nil {
		t.Fatalf("log in and open the reports: %v", err)
	}
	names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#reports a')].map(a => a.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, ", "); got != `<b>odd&"x, bad, nightly` {
		t.Errorf("reports listed: %q, want the three directories with bench files, names as text", got)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#reports b').length`)); err != nil || n != 0 {
		t.Errorf("a directory's name made markup: %d <b> elements (%v)", n, err)
	}

	// The odd name's link reaches its report (the URL escapes it).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#reports li:first-child a`)), chromedp.WaitVisible(chromedp.ID("scale"))); err != nil {
		t.Fatalf("open the odd report: %v", err)
	}
	if h, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1"))); err != nil || h != `Report <b>odd&"x` {
		t.Errorf("the odd report's title: %q (%v)", h, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/reports"), chromedp.WaitVisible(chromedp.ID("reports")),
		chromedp.Click(chromedp.CSS(`#reports a[href="/ui/reports/nightly"]`)), chromedp.WaitVisible(chromedp.ID("fleet-run"))); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	plots, err := chromedp.Run(ctx, chromedp.Evaluate[[]plotInfo](plotsJS))
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != len(want.Plots()) {
		t.Errorf("%d plots drawn, the report has %d", len(plots), len(want.Plots()))
	}
	for i, p := range plots {
		if i < len(want.Plots()) && (p.ID != want.Plots()[i].Name || p.Kind != string(want.Plots()[i].Kind)) {
			t.Errorf("plot %d: %q %q, want %q %q", i, p.ID, p.Kind, want.Plots()[i].Name, want.Plots()[i].Kind)
		}
		if p.Width < 300 || p.Height < 150 || p.Texts < 5 || p.InlineStyles != 0 {
			t.Errorf("plot %s drawn %gx%g with %d texts and %d inline styles", p.ID, p.Width, p.Height, p.Texts, p.InlineStyles)
		}
	}
	missing, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#fleet-full .missing")))
	if err != nil || !strings.Contains(missing, "nightly/fleet-full.json is not there. sigctl fleet --out bench/fleet-full.json") {
		t.Errorf("the missing full run: %q (%v)", missing, err)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('script, [style]').length`)); err != nil || n != 0 {
		t.Errorf("%d scripts or inline styles on the report page (%v)", n, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(80))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(t), "10-report.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.ID("fleet-run-figure-6"))); err != nil {
		t.Fatal(err)
	}
	if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(t), "11-report-plot.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/reports/bad"), chromedp.WaitVisible(chromedp.ID("error"))); err != nil {
		t.Fatal(err)
	}
	if msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("error"))); err != nil || !strings.Contains(msg, "scale.json: field points[0].submit_p50_ms, submit_p99_ms: missing") {
		t.Errorf("malformed inputs: %q (%v)", msg, err)
	}
	for _, name := range []string{"empty", "..", "%2e%2e"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/reports/"+name)); err != nil {
			t.Fatal(err)
		}
		if h, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1"))); err != nil || h == "" || strings.HasPrefix(h, "Report") {
			t.Errorf("/ui/reports/%s: %q (%v), want no report", name, h, err)
		}
	}
}

// TestBrowserTrainerStall is issue 30's trainer page in a real browser: a
// job's reported stall by cause as a table and a chart (every text, a
// component written like a script included, shown as text), what its
// pipeline waits on now, and the operator's form that raises the
// pipeline's priority, CSRF-checked: posted without the page's token it
// is refused and changes nothing; from the page it sets the priority.
func TestBrowserTrainerStall(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{})
	e.Pipelines()
	const xss = `<script>alert("stall")</script>`
	st := &sigv1.TrainerStatus{Job: "ranker", Client: "ctr", Pipeline: "ctr-small", Phase: "initial", Chips: 4, Steps: 9,
		InputStallSeconds: 734.5, Stall: []*sigv1.StallCause{
			{Kind: "queued", Component: `unigrams(lower(col("query")))`, Block: "b3", Client: "ranking", Priority: 900, Seconds: 720, Ahead: 340, AheadOf: 340,
				Sentence: `12m0s waiting on unigrams(lower(col("query"))), block b3, queued behind 340 tasks (340 of client ranking at priority 900)`},
			{Kind: "reader_fetch", Component: xss, Block: "b4", Seconds: 14.5, Sentence: "14.5s waiting on a reader (fetch), block " + xss},
		}}
	if _, err := e.SIG("trainer").ReportTrainerStatus(e.Ctx, st); err != nil {
		t.Fatal(err)
	}
	bctx := newChromium(t)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	base := "http://" + e.Srv.HTTPAddr()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			loc, _ := chromedp.Run(bctx, chromedp.Location())
			t.Fatalf("%s: %v (at %s)", what, err, loc)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	do("log in", chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), e.Srv.Tokens[evictiontest.Operator]), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("hit-rate")))
	do("open the trainer from the overview", chromedp.Click(chromedp.CSS(`#trainers a[href="/ui/trainer/ctr/ranker"]`)),
		chromedp.WaitVisible(chromedp.ID("stall")))
	if tab := text("#stall"); !strings.Contains(tab, "queued behind 340 tasks (340 of client ranking at priority 900)") ||
		!strings.Contains(tab, xss) || !strings.Contains(tab, "340 of 340 tasks: ranking at priority 900") {
		t.Errorf("stall table: %q", tab)
	}
	if n := count("script"); n != 0 {
		t.Errorf("%d script elements: the component's text was not escaped", n)
	}
	if n := count("#stall-chart svg rect"); n < 2 {
		t.Errorf("stall chart: %d bars", n)
	}
	if tot := text("#stall-total"); !strings.Contains(tot, "12m14.5s") {
		t.Errorf("stall total: %q", tot)
	}
	if n := count("#pending"); n != 1 {
		t.Errorf("no table of what the pipeline waits on now")
	}
	if n := count("[style]"); n != 0 {
		t.Errorf("%d elements with inline styles, which the CSP blocks", n)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		_ = os.WriteFile(filepath.Join(artifacts(t), "trainer-stall.png"), png, 0o644)
	}

	priority := func() int32 {
		p, err := e.Srv.Frontend().Cache().Pipeline("ctr", "ctr-small")
		if err != nil {
			t.Fatal(err)
		}
		return p.Priority
	}
	// A cross-site post (the session cookie, no CSRF token) is refused.
	before := priority()
	do("a forged post", chromedp.Evaluate[chromedp.Void](`(() => { const f = document.createElement("form");
		f.method = "post"; f.action = "/ui/priority";
		for (const [k, v] of [["client", "ctr"], ["pipeline", "ctr-small"], ["priority", "999"], ["job", "ranker"]]) {
			const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); })()`), chromedp.WaitVisible(chromedp.CSS("h1")))
	if h := text("h1"); !strings.Contains(h, "CSRF") || priority() != before {
		t.Fatalf("a post without the CSRF token: %q, priority %d (was %d)", h, priority(), before)
	}
	do("back to the trainer", chromedp.Navigate(base+"/ui/trainer/ctr/ranker"), chromedp.WaitVisible(chromedp.ID("raise-priority")))
	do("raise the priority", chromedp.SetValue(chromedp.CSS(`#raise-priority input[name=priority]`), "950"),
		chromedp.Click(chromedp.CSS(`#raise-priority button[type=submit]`)), chromedp.WaitVisible(chromedp.ID("notice")))
	if n := text("#notice"); !strings.Contains(n, "Priority set to 950") {
		t.Errorf("notice after raising: %q", n)
	}
	if p := priority(); p != 950 {
		t.Fatalf("pipeline priority %d after the form, want 950", p)
	}
	// The notice shows numbers only: a crafted link's text is not shown.
	do("a crafted notice link", chromedp.Navigate(base+"/ui/trainer/ctr/ranker?moved=3&priority=call%20support%20at%20evil.example"),
		chromedp.WaitVisible(chromedp.ID("raise-priority")))
	if n := count("#notice"); n != 0 {
		t.Errorf("a crafted link's priority text shown as a notice: %q", text("#notice"))
	}
}
