// Package console is the operator console: the page the on-call person
// uses to see what waits for a decision and to record one, and the runs
// behind it. It is plain HTML, CSS and two small JavaScript files (the
// operations view, and runs.js for the runs views), embedded in the binary and
// served by the API process; the page talks to the public JSON API with
// the person's bearer token, so the console has no server-side domain code
// and no privileges of its own.
//
// Every answer carries a strict Content-Security-Policy (this origin only,
// no inline script or style, no framing), X-Content-Type-Options nosniff and
// Referrer-Policy no-referrer. Assets are served gzip-compressed to clients
// that accept it, with an ETag so a reload costs a 304.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed assets
var files embed.FS

// AssetPrefix is where the console's assets are served; the page itself is
// at /.
const AssetPrefix = "/console/"

// ContentSecurityPolicy is sent with every console response: scripts,
// styles and API calls from this origin only, images from here or data:
// URLs, nothing inline, no <base>, forms post only here, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Asset is one embedded file as it is served.
type Asset struct {
	// Path is where it is served (/ for the page).
	Path        string
	ContentType string
	Body        []byte
	// Gzip is Body compressed; it is served when the client accepts gzip.
	Gzip []byte
	etag string
}

var assets = mustLoad()

func mustLoad() map[string]*Asset {
	out := map[string]*Asset{}
	for _, f := range []struct{ file, path, ctype string }{
		{"index.html", "/", "text/html; charset=utf-8"},
		{"console.css", AssetPrefix + "console.css", "text/css; charset=utf-8"},
		{"console.js", AssetPrefix + "console.js", "text/javascript; charset=utf-8"},
		{"runs.js", AssetPrefix + "runs.js", "text/javascript; charset=utf-8"},
	} {
		body, err := files.ReadFile(path.Join("assets", f.file))
		if err != nil {
			panic(fmt.Sprintf("console: embedded %s: %v", f.file, err))
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			panic(fmt.Sprintf("console: gzip %s: %v", f.file, err))
		}
		sum := sha256.Sum256(body)
		out[f.path] = &Asset{Path: f.path, ContentType: f.ctype, Body: body, Gzip: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

// Assets lists what the console serves (for tests and for its page weight).
func Assets() []Asset {
	out := make([]Asset, 0, len(assets))
	for _, p := range []string{"/", AssetPrefix + "console.css", AssetPrefix + "console.js", AssetPrefix + "runs.js"} {
		out = append(out, *assets[p])
	}
	return out
}

// Handler serves the page at / and its assets under AssetPrefix; mount it
// on both. Only GET and HEAD are answered.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	a, ok := assets[r.URL.Path]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no console page or asset %s; the console is at /", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s; the console answers GET and HEAD", r.Method, r.URL.Path))
		return
	}
	// Revalidate every time (a 304 is cheap): after an upgrade the page and
	// its script must not come from two versions.
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", a.ContentType)
	h.Set("Vary", "Accept-Encoding")
	body, etag := a.Body, a.etag
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body, etag = a.Gzip, strings.TrimSuffix(a.etag, `"`)+`-gz"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reads an Accept-Encoding header: gzip listed without q=0,
// or else * listed without q=0.
func acceptsGzip(header string) bool {
	star := false
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		ok := true
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f == 0 {
					ok = false
				}
			}
		}
		if name == "gzip" {
			return ok
		}
		star = ok
	}
	return star
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
