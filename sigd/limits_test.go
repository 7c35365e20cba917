package sigd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestWatchLimitPerPrincipal: a principal holds at most
// sigd.MaxWatchesPerPrincipal open WatchReadSolution streams; one more is
// refused with ResourceExhausted saying so, other principals are not
// affected, and ending a stream frees its place.
func TestWatchLimitPerPrincipal(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := srv.SIG(t, "ctr")
	// No workers: the solution stays pending and every watch stays open.
	if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, hashGraph(11), w.All())); err != nil {
		t.Fatal(err)
	}
	watch := func(c sigv1.SIGClient) (context.CancelFunc, error) {
		wctx, wcancel := context.WithCancel(ctx)
		st, err := c.WatchReadSolution(wctx, &sigv1.WatchReadSolutionRequest{Client: "ctr", Pipeline: "p"})
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			wcancel()
		}
		return wcancel, err
	}
	var open []context.CancelFunc
	defer func() {
		for _, f := range open {
			f()
		}
	}()
	for i := range sigd.MaxWatchesPerPrincipal {
		f, err := watch(c)
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		open = append(open, f)
	}
	_, err := watch(c)
	if s, _ := status.FromError(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "watch") {
		t.Fatalf("watch beyond the limit: %v, want ResourceExhausted", err)
	}
	// Another principal (an operator acting for the same client) still may.
	f, err := watch(srv.SIG(t, "operator"))
	if err != nil {
		t.Fatalf("operator's watch: %v", err)
	}
	open = append(open, f)
	// Ending one of ctr's streams frees its place (once the server has seen
	// the cancellation).
	open[0]()
	for {
		f, err := watch(c)
		if err == nil {
			open = append(open, f)
			break
		}
		if status.Code(err) != codes.ResourceExhausted || ctx.Err() != nil {
			t.Fatalf("watch after ending one: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUICookiesOverPlainHTTP: with gRPC served over TLS the web UI is still
// served over plain HTTP, so its cookies must not be Secure (a browser
// would drop them and login would fail); behind a declared TLS-terminating
// proxy (--http-behind-tls-proxy) they are.
func TestUICookiesOverPlainHTTP(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 50})
	cert, key := selfSignedCert(t)
	for _, proxy := range []bool{false, true} {
		srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, TLSCert: cert, TLSKey: key, HTTPBehindTLSProxy: proxy}, sigd.Options{})
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Jar: jar}
		base := "http://" + srv.HTTPAddr()
		resp, err := hc.Get(base + "/ui/login")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		secure := false
		for _, c := range resp.Cookies() {
			secure = secure || c.Secure
		}
		if secure != proxy {
			t.Errorf("behind TLS proxy %v: login page cookies %v, want Secure %v", proxy, resp.Cookies(), proxy)
		}
		if proxy {
			continue // a plain HTTP client rightly drops Secure cookies
		}
		m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token in login page:\n%s", page)
		}
		resp, err = hc.PostForm(base+"/ui/login", url.Values{"csrf": {string(m[1])}, "token": {srv.Tokens["operator"]}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || !strings.Contains(string(body), "<h1>Overview</h1>") {
			t.Errorf("operator login over plain HTTP with gRPC TLS: %s at %s", resp.Status, resp.Request.URL)
		}
	}
}

// selfSignedCert writes a certificate and key for 127.0.0.1 and returns
// their paths.
func selfSignedCert(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sigd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
