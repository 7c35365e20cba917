package ui_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// browser is an HTTP client with a cookie jar, as a browser would be.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, e *evictiontest.Env) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: "http://" + e.Srv.HTTPAddr(), c: &http.Client{Jar: jar}}
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp, string(body)
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in page:\n%s", page)
	}
	return m[1]
}

// login logs in with a token and returns the response and the page it
// lands on.
func (b *browser) login(token string) (*http.Response, string) {
	b.t.Helper()
	_, page := b.get("/ui/login")
	return b.post("/ui/login", url.Values{"csrf": {csrfOf(b.t, page)}, "token": {token}})
}

// operator logs in as the operator and returns the session's CSRF token.
func (b *browser) operator(e *evictiontest.Env) string {
	b.t.Helper()
	resp, page := b.login(e.Srv.Tokens[evictiontest.Operator])
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || !strings.Contains(page, "<h1>Overview</h1>") {
		b.t.Fatalf("operator login: %s at %s:\n%s", resp.Status, resp.Request.URL, page)
	}
	return csrfOf(b.t, page)
}

func (b *browser) hasSession() bool {
	u, _ := url.Parse(b.base + "/ui/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "sig_session" {
			return true
		}
	}
	return false
}

const (
	xssRaw     = "<script>alert(1)</script>"
	xssEscaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
)

func checkEscaped(t *testing.T, what, page string) {
	t.Helper()
	if strings.Contains(page, xssRaw) {
		t.Errorf("%s: the pipeline name is in the HTML unescaped", what)
	}
	if !strings.Contains(page, xssEscaped) {
		t.Errorf("%s: the pipeline name is not shown escaped:\n%s", what, page)
	}
}

// TestUISecurity: the web UI is for operators only; every state-changing
// form needs the session's CSRF token; user-supplied names are escaped.
func TestUISecurity(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{Blocks: 1, Rows: 50})
	e.Pipelines()
	cvrSol := e.Solution("cvr", evictiontest.XSSPipeline)
	ctrSol := e.Solution("ctr", "ctr-small")
	affected := append(evictiontest.Components(cvrSol)[:1], sigdtest.InputKey(t, ctrSol, "qa_overlap"), sigdtest.InputKey(t, ctrSol, "query_ids"))
	evictForm := url.Values{"subgraph": {evictiontest.FaultySubgraph}, "reason": {"tokenizer bug"}}

	t.Run("anonymous", func(t *testing.T) {
		b := newBrowser(t, e)
		for _, p := range []string{"/ui/", "/ui/search?subgraph=x", "/ui/audit", "/ui/component/" + affected[0].String()} {
			resp, _ := b.get(p)
			if resp.Request.URL.Path != "/ui/login" {
				t.Errorf("GET %s without a session ended at %s, want the login page", p, resp.Request.URL)
			}
		}
		resp, _ := b.post("/ui/evict/confirm", evictForm)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("anonymous eviction: %s, want 403", resp.Status)
		}
	})

	t.Run("non-operator tokens", func(t *testing.T) {
		for _, p := range []string{"ctr", "worker"} {
			b := newBrowser(t, e)
			resp, page := b.login(e.Srv.Tokens[p])
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "for operators") {
				t.Errorf("%s logs in: %s\n%s", p, resp.Status, page)
			}
			if b.hasSession() {
				t.Errorf("%s got a session", p)
			}
			if resp, _ := b.get("/ui/audit"); resp.Request.URL.Path != "/ui/login" {
				t.Errorf("%s reached %s", p, resp.Request.URL)
			}
		}
		b := newBrowser(t, e)
		if resp, _ := b.login("not-a-token-at-all-0123456789"); resp.StatusCode != http.StatusUnauthorized || b.hasSession() {
			t.Errorf("unknown token: %s", resp.Status)
		}
	})

	t.Run("login CSRF", func(t *testing.T) {
		b := newBrowser(t, e)
		resp, _ := b.post("/ui/login", url.Values{"token": {e.Srv.Tokens[evictiontest.Operator]}, "csrf": {strings.Repeat("a", 64)}})
		if resp.StatusCode != http.StatusForbidden || b.hasSession() {
			t.Errorf("login without the login form's token: %s", resp.Status)
		}
	})

	t.Run("session cookie", func(t *testing.T) {
		b := newBrowser(t, e)
		_, page := b.get("/ui/login")
		b.c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, _ := b.post("/ui/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {e.Srv.Tokens[evictiontest.Operator]}})
		var c *http.Cookie
		for _, x := range resp.Cookies() {
			if x.Name == "sig_session" {
				c = x
			}
		}
		if resp.StatusCode != http.StatusSeeOther || c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" {
			t.Errorf("login response %s, session cookie %+v", resp.Status, c)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("CSP %q", csp)
		}
	})

	t.Run("CSRF", func(t *testing.T) {
		b := newBrowser(t, e)
		csrf := b.operator(e)
		other := newBrowser(t, e)
		otherCSRF := other.operator(e)
		for name, tok := range map[string]string{"no": "", "a wrong": strings.Repeat("0", 64), "another session's": otherCSRF,
			"a truncated": csrf[:32]} {
			for _, path := range []string{"/ui/evict/confirm", "/ui/evict/dry-run", "/ui/logout", "/ui/quarantine/release", "/ui/block"} {
				f := url.Values{"subgraph": evictForm["subgraph"], "reason": evictForm["reason"], "component": {affected[0].String()},
					"block": {e.Blocks[0].ID}, "action": {"evict"}}
				if tok != "" {
					f.Set("csrf", tok)
				}
				resp, page := b.post(path, f)
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "CSRF") {
					t.Errorf("POST %s with %s CSRF token: %s", path, name, resp.Status)
				}
			}
		}
		// The valid token of a session that is not the caller's.
		anon := newBrowser(t, e)
		if resp, _ := anon.post("/ui/evict/confirm", url.Values{"csrf": {csrf}, "subgraph": evictForm["subgraph"], "reason": evictForm["reason"]}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("eviction with a stolen CSRF token and no session: %s", resp.Status)
		}
		for _, k := range affected {
			e.CheckMemoized(k)
		}
		if a, err := e.SIG(evictiontest.Operator).ListAudit(e.Ctx, &sigv1.ListAuditRequest{}); err != nil || len(a.Entries) != 0 {
			t.Errorf("audit after refused evictions: %v %v", a, err)
		}
		// The session survived the refused logout, and its token works.
		resp, page := b.post("/ui/evict/dry-run", url.Values{"csrf": {csrf}, "subgraph": evictForm["subgraph"]})
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="impact-components">3<`) {
			t.Errorf("dry run with the session's token: %s\n%s", resp.Status, page)
		}
		for _, k := range affected {
			e.CheckMemoized(k)
		}
		// A confirmation without a reason evicts nothing.
		resp, page = b.post("/ui/evict/confirm", url.Values{"csrf": {csrf}, "subgraph": evictForm["subgraph"]})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "reason is required") {
			t.Errorf("confirmation without a reason: %s", resp.Status)
		}
		for _, k := range affected {
			e.CheckMemoized(k)
		}
		// Logging out ends the session.
		if resp, _ := b.post("/ui/logout", url.Values{"csrf": {csrf}}); resp.Request.URL.Path != "/ui/login" {
			t.Errorf("logout ended at %s", resp.Request.URL)
		}
		if resp, _ := b.post("/ui/evict/confirm", url.Values{"csrf": {csrf}, "subgraph": evictForm["subgraph"], "reason": {"r"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("eviction after logout: %s", resp.Status)
		}
	})

	t.Run("escaping", func(t *testing.T) {
		b := newBrowser(t, e)
		csrf := b.operator(e)
		_, page := b.get("/ui/search?" + url.Values{"subgraph": {evictiontest.FaultySubgraph}}.Encode())
		checkEscaped(t, "search results", page)
		_, page = b.get("/ui/search?" + url.Values{"pipeline": {evictiontest.XSSPipeline}}.Encode())
		checkEscaped(t, "search by pipeline", page)
		if !strings.Contains(page, "/ui/component/"+affected[0].String()) {
			t.Error("search by the pipeline's name did not find its component")
		}
		_, page = b.get("/ui/component/" + affected[0].String())
		checkEscaped(t, "component page", page)
		_, page = b.post("/ui/evict/dry-run", url.Values{"csrf": {csrf}, "subgraph": {evictiontest.FaultySubgraph}})
		checkEscaped(t, "dry run", page)
		reason := `<img src=x onerror=alert(2)> "quoted"`
		resp, page := b.post("/ui/evict/confirm", url.Values{"csrf": {csrf}, "subgraph": {evictiontest.FaultySubgraph}, "reason": {reason}})
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="audit-id"`) {
			t.Fatalf("eviction: %s\n%s", resp.Status, page)
		}
		checkEscaped(t, "eviction done", page)
		for _, k := range affected {
			e.CheckEvicted(k)
		}
		_, page = b.get("/ui/audit")
		if strings.Contains(page, "<img") || !strings.Contains(page, "&lt;img src=x onerror=alert(2)&gt;") {
			t.Errorf("audit page does not escape the reason:\n%s", page)
		}
	})
}
