package console_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/console"
)

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every console answer, errors included, carries the security headers.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/", 200}, {"HEAD", "/", 200}, {"GET", "/console/console.js", 200}, {"GET", "/console/console.css", 200},
		{"GET", "/console/nope.js", 404}, {"POST", "/", 405}, {"DELETE", "/console/console.js", 405},
	} {
		r := get(t, h, c.method, c.path)
		if r.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, r.StatusCode, c.status)
		}
		want := map[string]string{
			"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		}
		for k, v := range want {
			if got := r.Header.Get(k); got != v {
				t.Errorf("%s %s: %s = %q, want %q", c.method, c.path, k, got, v)
			}
		}
		if c.status == 405 && r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, r.Header.Get("Allow"))
		}
		if c.status >= 400 && !strings.Contains(string(body(t, r)), `"error"`) {
			t.Errorf("%s %s: error body is not the API's {\"error\"} shape", c.method, c.path)
		}
	}
	if r := get(t, h, "GET", "/"); r.Header.Get("Content-Type") != "text/html; charset=utf-8" || r.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("page headers: %v", r.Header)
	}
	if r := get(t, h, "GET", "/console/console.js"); r.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Errorf("script type: %q", r.Header.Get("Content-Type"))
	}
}

// The policy is only as strict as the page lets it be: no inline script or
// style (which the policy would block and the page would break), no
// address outside this origin, no HTML parsing of data anywhere in the
// script, and every asset the page names is served.
func TestPageNeedsNothingTheCSPForbids(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	page := string(body(t, get(t, h, "GET", "/")))
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`),
		regexp.MustCompile(`(?i)javascript:`),
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("page has %q (matched %s)", m, bad)
		}
	}
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(tag, `src="/console/`) {
			t.Errorf("script tag %q is not one of the console's files", tag)
		}
	}
	refs := regexp.MustCompile(`(?i)(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("page names %d assets", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		switch {
		case ref == "data:,": // the empty favicon: no request at all
		case strings.HasPrefix(ref, "/console/"):
			if r := get(t, h, "GET", ref); r.StatusCode != 200 {
				t.Errorf("page names %s, served %d", ref, r.StatusCode)
			}
		default:
			t.Errorf("page names %q: only /console/ assets and data: are allowed", ref)
		}
	}
	for _, a := range console.Assets() {
		text := string(a.Body)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser", "createContextualFragment"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s uses %s: data must reach the page as text only", a.Path, bad)
			}
		}
		if m := regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[/"')]`).FindString(text); m != "" {
			t.Errorf("%s names another origin: %q", a.Path, m)
		}
		if strings.Contains(text, "@import") || strings.Contains(text, "@font-face") {
			t.Errorf("%s imports a stylesheet or a font", a.Path)
		}
	}
	js := string(body(t, get(t, h, "GET", "/console/console.js")))
	if strings.Contains(js, "localStorage") || !strings.Contains(js, "sessionStorage") {
		t.Error("the token must live in sessionStorage, never localStorage")
	}
}

// Clients that accept gzip get the compressed body (the same bytes once
// decompressed); an ETag makes a reload a 304.
func TestCompressionAndRevalidation(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	for _, a := range console.Assets() {
		plain := get(t, h, "GET", a.Path)
		if !bytes.Equal(body(t, plain), a.Body) || plain.Header.Get("Content-Encoding") != "" {
			t.Fatalf("%s without Accept-Encoding", a.Path)
		}
		gz := get(t, h, "GET", a.Path, "Accept-Encoding", "br, gzip;q=0.8")
		if gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("%s: %v", a.Path, gz.Header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(body(t, gz)))
		if err != nil {
			t.Fatal(err)
		}
		un, _ := io.ReadAll(zr)
		if !bytes.Equal(un, a.Body) {
			t.Fatalf("%s: gzip body differs", a.Path)
		}
		if r := get(t, h, "GET", a.Path, "Accept-Encoding", "gzip;q=0, identity"); r.Header.Get("Content-Encoding") != "" {
			t.Fatalf("%s: gzip;q=0 got gzip", a.Path)
		}
		if r := get(t, h, "GET", a.Path, "Accept-Encoding", "*"); r.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: * did not get gzip", a.Path)
		}
		for _, resp := range []*http.Response{plain, gz} {
			etag := resp.Header.Get("ETag")
			enc := resp.Header.Get("Content-Encoding")
			again := get(t, h, "GET", a.Path, "If-None-Match", etag, "Accept-Encoding", enc)
			if etag == "" || again.StatusCode != http.StatusNotModified {
				t.Fatalf("%s (%q): If-None-Match %s → %d", a.Path, enc, etag, again.StatusCode)
			}
		}
		if plain.Header.Get("ETag") == gz.Header.Get("ETag") {
			t.Fatalf("%s: one ETag for two encodings", a.Path)
		}
	}
}

// TestPageWeight keeps the console small: what a first visit downloads, the
// page, its style sheet and its two scripts.
func TestPageWeight(t *testing.T) {
	t.Parallel()
	var raw, gz int
	for _, a := range console.Assets() {
		raw += len(a.Body)
		gz += len(a.Gzip)
		t.Logf("%-22s %6d bytes, %5d gzip", a.Path, len(a.Body), len(a.Gzip))
	}
	t.Logf("%-22s %6d bytes, %5d gzip", "total", raw, gz)
	if raw > 80<<10 || gz > 25<<10 {
		t.Fatalf("the console weighs %d bytes (%d gzip); the budget is 80 KiB (25 KiB gzip)", raw, gz)
	}
}
