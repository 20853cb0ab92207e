//go:build image

package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The image smoke test (make image-smoke, through deploy/smoke.sh, which
// builds the image first): the documented topology's two halves in
// containers of the image, against CI's PostgreSQL in a fresh database
// and one shared data volume. A `reckon dev --no-worker` container is the
// API, the publisher, the pipeline and an embedded Temporal; a `reckon
// serve --worker` container runs the runs, its run_command in bubblewrap.
// The test waits for both /readyz, starts a plan through the API whose
// run_command effect lands and then "crashes" its worker, sees the
// operation listed failed_uncertain, and sees the pipeline's workspace
// probe (reading the worker's workspace through the shared volume) settle
// it occurred. A worker container with podman's defaults (its /proc
// masked) refuses to start with one line naming RECKON_SANDBOX_UNCONFINED.
//
// Environment: RECKON_IMAGE (the image), SMOKE_PODMAN (the podman
// command line, with its options), SMOKE_RUN_ARGS (options of every
// `podman run`), SMOKE_ADMIN_URL (a PostgreSQL URL allowed to create
// databases), SMOKE_REVISION (the commit the image was built from).

// smoke is one smoke run's settings and the containers it started.
type smoke struct {
	t               *testing.T
	podman, runArgs []string
	image, dbURL    string
	volume, prefix  string
	token           string
	containers      []string
}

func newSmoke(t *testing.T) *smoke {
	t.Helper()
	need := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			t.Fatalf("%s is unset: run the image smoke test through `make image-smoke`", k)
		}
		return v
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s := &smoke{t: t, podman: strings.Fields(need("SMOKE_PODMAN")), runArgs: strings.Fields(os.Getenv("SMOKE_RUN_ARGS")),
		image: need("RECKON_IMAGE"), prefix: "reckon-smoke-" + id, token: "smoke-operator-" + id}
	s.dbURL = s.freshDatabase(need("SMOKE_ADMIN_URL"), "reckon_smoke_"+id)
	s.volume = s.prefix + "-data"
	s.run("volume", "create", s.volume)
	t.Cleanup(func() {
		for _, c := range s.containers {
			if t.Failed() {
				out, _ := s.output("logs", "--tail", "40", c)
				t.Logf("logs of %s:\n%s", c, out)
			}
			_, _ = s.output("rm", "-f", "-t", "2", c)
		}
		_, _ = s.output("volume", "rm", "-f", s.volume)
	})
	return s
}

// freshDatabase creates database name through admin and drops it at
// cleanup; it returns the database's URL.
func (s *smoke) freshDatabase(admin, name string) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		s.t.Fatalf("SMOKE_ADMIN_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		s.t.Fatal(err)
	}
	u.Path = "/" + name
	if u.User == nil {
		// The containers' user (reckon) is no role here: name the one
		// this connection used.
		u.User = url.User(conn.Config().User)
	}
	return u.String()
}

// output runs podman with args and returns its combined output.
func (s *smoke) output(args ...string) (string, error) {
	cmd := exec.Command(s.podman[0], append(s.podman[1:], args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run runs podman with args and fails the test if it fails.
func (s *smoke) run(args ...string) string {
	s.t.Helper()
	out, err := s.output(args...)
	if err != nil {
		s.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// start starts a detached container of the image named prefix-name, on
// the host's network with the shared data volume, and returns its name.
func (s *smoke) start(name string, opts []string, env map[string]string, args ...string) string {
	s.t.Helper()
	c := s.prefix + "-" + name
	a := append([]string{"run", "-d", "--name", c, "--network", "host", "-v", s.volume + ":/var/lib/reckon"}, s.runArgs...)
	a = append(a, opts...)
	for k, v := range env {
		a = append(a, "-e", k+"="+v)
	}
	a = append(append(a, s.image), args...)
	s.run(a...)
	s.containers = append(s.containers, c)
	return c
}

// logMatch waits until container c's log has a match of re and returns
// its first group.
func (s *smoke) logMatch(ctx context.Context, c string, re *regexp.Regexp) string {
	s.t.Helper()
	for {
		out, _ := s.output("logs", c)
		if m := re.FindStringSubmatch(out); m != nil {
			return m[1]
		}
		state, _ := s.output("inspect", "--format", "{{.State.Status}}", c)
		if ctx.Err() != nil || strings.TrimSpace(state) == "exited" {
			s.t.Fatalf("%s (%s) never logged %s:\n%s", c, strings.TrimSpace(state), re, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// call makes an API request with the smoke's operator token and decodes
// the answer into a map.
func (s *smoke) call(ctx context.Context, method, u, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, map[string]any{"error": err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// until polls cond every 250ms until it holds; what says what for.
func (s *smoke) until(ctx context.Context, what string, cond func() (bool, any)) {
	s.t.Helper()
	start := time.Now()
	for {
		ok, last := cond()
		if ok {
			s.t.Logf("%s after %s", what, time.Since(start).Round(10*time.Millisecond))
			return
		}
		if ctx.Err() != nil {
			s.t.Fatalf("timed out waiting for %s; last: %v", what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ready is a /readyz poll of base.
func (s *smoke) ready(ctx context.Context, base string) func() (bool, any) {
	return func() (bool, any) {
		code, m := s.call(ctx, http.MethodGet, base+"/readyz", "")
		return code == http.StatusOK && m["status"] == "ready", fmt.Sprint(code, m)
	}
}

func TestImageSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s := newSmoke(t)

	if rev := os.Getenv("SMOKE_REVISION"); rev != "" {
		if out := s.run(append(append([]string{"run", "--rm"}, s.runArgs...), s.image, "version")...); !strings.Contains(out, "revision "+rev) {
			t.Fatalf("reckon version in the image: %q, want revision %s", out, rev)
		}
	}
	for _, label := range []string{"io.reckon.sandbox", "org.opencontainers.image.revision"} {
		if v := s.run("image", "inspect", "--format", "{{index .Labels \""+label+"\"}}", s.image); v == "" || v == "<no value>" {
			t.Fatalf("the image has no %s label", label)
		}
	}

	common := map[string]string{"DATABASE_URL": s.dbURL, "RECKON_LOG_LEVEL": "info"}
	with := func(m map[string]string) map[string]string {
		for k, v := range common {
			m[k] = v
		}
		return m
	}
	// API, publisher, pipeline and an embedded Temporal; no sandbox here,
	// so no /proc unmasked.
	dev := s.start("dev", nil, with(map[string]string{
		"RECKON_HTTP_ADDR": "127.0.0.1:0", "RECKON_TOKENS": "smoke:operator:" + s.token,
		"RECKON_TRIAGE_SCHEDULE": "@every 2s",
	}), "dev", "--no-worker")
	apiAddr := s.logMatch(ctx, dev, regexp.MustCompile(`"api_addr":"([^"]+)"`))
	temporal := s.logMatch(ctx, dev, regexp.MustCompile(`"temporal_address":"([^"]+)"`))
	api := "http://" + apiAddr
	s.until(ctx, "the API's /readyz", s.ready(ctx, api))

	workerEnv := func() map[string]string {
		return with(map[string]string{"TEMPORAL_ADDRESS": temporal, "RECKON_METRICS_ADDR": "127.0.0.1:0",
			"KERNEL_FAULT_AFTER_EFFECT": "run_command"})
	}
	// Without /proc unmasked the worker refuses, with one line.
	masked := s.start("masked-worker", nil, workerEnv(), "serve", "--worker")
	if code := s.run("wait", masked); code != "1" {
		t.Fatalf("a worker without /proc unmasked exited %s, want 1", code)
	}
	if out, _ := s.output("logs", masked); !strings.Contains(out, "configuration: RECKON_SANDBOX_UNCONFINED") {
		t.Fatalf("a worker without /proc unmasked said:\n%s", out)
	}

	worker := s.start("worker", []string{"--security-opt", "unmask=/proc/*", "--security-opt", "seccomp=unconfined"}, workerEnv(), "serve", "--worker")
	metrics := s.logMatch(ctx, worker, regexp.MustCompile(`metrics on (http://[^/]+)/metrics`))
	s.until(ctx, "the worker's /readyz", s.ready(ctx, metrics))

	plan := `{"project":"smoke","run_id":"smoke-1","plan":{"steps":[{"tool":"run_command",
		"args":{"command":"echo hello > proof.txt","timeout_s":30},"postcondition":{"path":"proof.txt"}}]}}`
	if code, m := s.call(ctx, http.MethodPost, api+"/v1/runs", plan); code != http.StatusCreated {
		t.Fatalf("start a plan: %d %v", code, m)
	}
	// The crash is journaled as uncertain: the operation is listed as
	// failed_uncertain, or already past that, when the pipeline's sweep
	// (every 2 s) settled it between two polls, and its history holds
	// the kernel's tool.failed with effect uncertain.
	history := api + "/v1/agent/operations/history?project=smoke&run_id=smoke-1&operation_id=op-1"
	s.until(ctx, "the operation failed uncertain", func() (bool, any) {
		_, m := s.call(ctx, http.MethodGet, api+"/v1/agent/operations?project=smoke", "")
		listed, _ := m["operations"].([]any)
		for _, o := range listed {
			if op, _ := o.(map[string]any); op["run_id"] == "smoke-1" && op["state"] == "failed_uncertain" {
				return true, m
			}
		}
		_, h := s.call(ctx, http.MethodGet, history, "")
		raw, _ := json.Marshal(h)
		return bytes.Contains(raw, []byte(`"tool.failed"`)) && bytes.Contains(raw, []byte(`"effect":"uncertain"`)), m
	})
	// The pipeline (in the dev container) proves the effect from the
	// worker's workspace, through the shared volume.
	s.until(ctx, "the pipeline's verdict", func() (bool, any) {
		_, m := s.call(ctx, http.MethodGet, history, "")
		raw, _ := json.Marshal(m)
		return bytes.Contains(raw, []byte(`"basis":"probe"`)) && bytes.Contains(raw, []byte(`"effect":"occurred"`)), m
	})
}
