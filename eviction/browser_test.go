package eviction_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sigdata/sig/internal/testenv"
	"github.com/sigdata/sig/matching"
)

// chromiumPath is Debian's chromium (make deps installs it).
const chromiumPath = "/usr/bin/chromium"

// artifacts returns the directory for this package's test artifacts:
// $SIG_TEST_ARTIFACTS/eviction, else testartifacts/eviction at the
// repository root.
func artifacts(t *testing.T) string {
	t.Helper()
	root := os.Getenv("SIG_TEST_ARTIFACTS")
	if root == "" {
		r, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		root = filepath.Join(r, "testartifacts")
	}
	dir := filepath.Join(root, "eviction")
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
	e := newEnv(t, envConfig{})
	e.pipelines()
	ctrSol, cvrSol := e.solution("ctr", "ctr-small"), e.solution("cvr", xssPipeline)
	qa, qids, price := inputKey(t, ctrSol, "qa_overlap"), inputKey(t, ctrSol, "query_ids"), inputKey(t, ctrSol, "price_bin")
	qsmall := inputKey(t, cvrSol, "q_small")
	affected := []matching.Key{qa, qids, qsmall}

	bctx := newChromium(t)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	dir := artifacts(t)
	base := "http://" + e.srv.HTTPAddr()
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
	do("log in", chromedp.SendKeys(chromedp.ID("token"), e.tokens[operator]), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("hit-rate")))
	shot("02-overview.png")
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || !strings.HasPrefix(title, "Overview") {
		t.Errorf("after login the title is %q (%v)", title, err)
	}

	// Search by subgraph.
	do("search", chromedp.Navigate(base+"/ui/search"), chromedp.WaitVisible(chromedp.ID("subgraph")),
		chromedp.SendKeys(chromedp.ID("subgraph"), faultySubgraph), chromedp.Click(chromedp.CSS(`#search-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("results")))
	shot("03-search.png")
	if n := count("#results a.component-link"); n != len(affected) {
		t.Errorf("search found %d components, want %d", n, len(affected))
	}
	// The pipeline named like a script is shown as text, and is no script.
	if txt, n := text("#results"), count("script"); !strings.Contains(txt, xssPipeline) || n != 0 {
		t.Errorf("results text %q, %d script elements", txt, n)
	}

	// Open a component.
	do("open a component", chromedp.Click(chromedp.CSS("#results a.component-link")), chromedp.WaitVisible(chromedp.ID("component-key")))
	shot("04-component.png")
	key, pipes := text("#component-key"), text("#pipelines")
	opened, err := matching.ParseKey(key)
	if err != nil {
		t.Fatalf("component page key %q: %v", key, err)
	}
	if !slices.Contains(affected, opened) || !strings.Contains(pipes, "/") {
		t.Errorf("opened component %s (pipelines %q), not one of the search results", key, pipes)
	}

	// Dry run, then confirm.
	do("dry run", chromedp.Navigate(base+"/ui/search?"+url.Values{"subgraph": {faultySubgraph}}.Encode()),
		chromedp.WaitVisible(chromedp.ID("evict-subgraph-link")),
		chromedp.Click(chromedp.ID("evict-subgraph-link")), chromedp.WaitVisible(chromedp.ID("dry-run-form")))
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("evict-subgraph"))); err != nil || v != faultySubgraph {
		t.Errorf("the eviction form holds %q (%v), want the searched subgraph", v, err)
	}
	do("dry run", chromedp.Click(chromedp.ID("dry-run")), chromedp.WaitVisible(chromedp.ID("confirm-form")))
	shot("05-dry-run.png")
	if c, b := text("#impact-components"), text("#impact-blocks"); c != "3" || b != "9" {
		t.Errorf("dry run: %s components, %s blocks; want 3 and 9", c, b)
	}
	for _, k := range affected {
		e.checkMemoized(k) // a dry run changes nothing
	}
	do("confirm", chromedp.SendKeys(chromedp.ID("reason"), "tokenizer bug: lower() dropped accents"),
		chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("audit-id")))
	shot("06-evicted.png")
	if id, notice := text("#audit-id"), text("#notice"); id == "" || !strings.Contains(notice, "Evicted 9 blocks of 3 components") {
		t.Errorf("after confirming: audit id %q, notice %q", id, notice)
	}

	// The objects are gone from MinIO, the read solution is pending.
	for _, k := range affected {
		e.checkEvicted(k)
	}
	e.checkMemoized(price)
	sol := e.solution("ctr", "ctr-small")
	if sol.Complete || pendingBlocks(sol, qa, qids) != 2*len(e.blocks) {
		t.Errorf("ctr solution after eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	do("audit", chromedp.Navigate(base+"/ui/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	shot("07-audit.png")
	if a := text("#audit"); !strings.Contains(a, "tokenizer bug") || !strings.Contains(a, operator) {
		t.Errorf("audit page: %q", a)
	}

	// Workers recompute; the component page shows every block ready.
	e.solution("cvr", xssPipeline)
	e.waitComplete("ctr", "ctr-small")
	e.waitComplete("cvr", xssPipeline)
	do("recomputed", chromedp.Navigate(base+"/ui/component/"+opened.String()), chromedp.WaitVisible(chromedp.ID("blocks")))
	shot("08-recomputed.png")
	if n := count("#blocks td.state-ready"); n != len(e.blocks) {
		t.Errorf("component page after recomputation: %d ready blocks, want %d", n, len(e.blocks))
	}
	for _, k := range affected {
		e.checkMemoized(k)
	}
}
