// Package deploy holds the deployment kit: the Dockerfile, the compose
// file, the systemd units. Its tests check what the files mean against
// reckon itself; deploy/check.sh runs the tools that read them
// (systemd-analyze, docker-compose), and the image smoke test
// (smoke_test.go, build tag image) runs the image.
package deploy

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of deploy/compose.yaml the checks read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		SecurityOpt []string          `yaml:"security_opt"`
	} `yaml:"services"`
}

// documented is the set of variables docs/configuration.md names.
func documented(t *testing.T) func(string) bool {
	t.Helper()
	raw, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	return func(v string) bool { return strings.Contains(doc, "`"+v+"`") }
}

// reckonVar says whether an environment variable is one of reckon's.
func reckonVar(k string) bool {
	return strings.HasPrefix(k, "RECKON_") || strings.HasPrefix(k, "TEMPORAL_") || k == "DATABASE_URL" || strings.HasPrefix(k, "KERNEL_")
}

// TestComposeTopology: the compose file runs every role of `reckon serve`
// in a service of its own and the gateway; the worker and the pipeline
// mount one volume at their RECKON_DATA_DIR (the workspace probe reads
// what the worker wrote); only the worker gets /proc unmasked (its
// sandbox); every reckon variable it sets is documented.
func TestComposeTopology(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	isDocumented := documented(t)
	roles := map[string]string{}
	for name, svc := range c.Services {
		if !strings.Contains(svc.Image, "RECKON_IMAGE") {
			continue
		}
		roles[strings.Join(svc.Command, " ")] = name
		for k := range svc.Environment {
			if reckonVar(k) && !isDocumented(k) {
				t.Errorf("service %s sets %s, which docs/configuration.md does not name", name, k)
			}
		}
		sandboxed := slices.Contains(svc.SecurityOpt, "systempaths=unconfined") && slices.Contains(svc.SecurityOpt, "seccomp=unconfined")
		if sandboxed != (name == "reckon-worker") || (len(svc.SecurityOpt) > 0) != sandboxed {
			t.Errorf("service %s: security_opt %v; only the worker's sandbox needs /proc unmasked and sethostname", name, svc.SecurityOpt)
		}
	}
	for _, cmd := range []string{"migrate", "serve --api", "serve --worker", "serve --publisher", "serve --pipeline", "mcp-gateway --http 0.0.0.0:8090"} {
		if roles[cmd] == "" {
			t.Errorf("no service runs `reckon %s` (services by command: %v)", cmd, roles)
		}
	}
	dataMount := func(name string) string {
		svc := c.Services[name]
		for _, v := range svc.Volumes {
			if src, dst, ok := strings.Cut(v, ":"); ok && dst == svc.Environment["RECKON_DATA_DIR"] {
				return src
			}
		}
		return ""
	}
	if w, p := dataMount("reckon-worker"), dataMount("reckon-pipeline"); w == "" || w != p {
		t.Errorf("worker's data volume %q, pipeline's %q: the pipeline's probes must read the worker's RECKON_DATA_DIR", w, p)
	}
}

// unit is a systemd unit's settings, each key's values in order.
type unit map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			u[k] = append(u[k], v)
		}
	}
	return u
}

// TestSystemdUnits: one unit per role, all reading the one environment
// file (so the worker and the pipeline share RECKON_DATA_DIR, whose
// variables are documented); the worker's unit sets none of the
// hardening options that would stop bubblewrap (namespaces, a masked
// /proc, seccomp filters, netlink), which every other unit sets.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	isDocumented := documented(t)
	env := readUnit(t, "systemd/reckon.env")
	for k := range env {
		if !isDocumented(k) {
			t.Errorf("reckon.env sets %s, which docs/configuration.md does not name", k)
		}
	}
	if env["RECKON_DATA_DIR"] == nil {
		t.Error("reckon.env sets no RECKON_DATA_DIR: the worker and the pipeline must share one")
	}
	bubblewrapStoppers := []string{"RestrictNamespaces", "ProtectProc", "ProcSubset", "ProtectKernelTunables", "ProtectKernelLogs",
		"ProtectHostname", "PrivateUsers", "SystemCallFilter", "RestrictAddressFamilies"}
	exec := regexp.MustCompile(`^/usr/local/bin/reckon (.+)$`)
	for file, cmd := range map[string]string{
		"reckon-migrate.service": "migrate", "reckon-api.service": "serve --api", "reckon-worker.service": "serve --worker",
		"reckon-publisher.service": "serve --publisher", "reckon-pipeline.service": "serve --pipeline",
		"reckon-gateway.service": "mcp-gateway --http 127.0.0.1:8090",
	} {
		u := readUnit(t, "systemd/"+file)
		if m := exec.FindStringSubmatch(strings.Join(u["ExecStart"], "")); m == nil || m[1] != cmd {
			t.Errorf("%s: ExecStart %v, want reckon %s", file, u["ExecStart"], cmd)
		}
		if !slices.Equal(u["EnvironmentFile"], []string{"/etc/reckon/reckon.env"}) {
			t.Errorf("%s: EnvironmentFile %v", file, u["EnvironmentFile"])
		}
		for _, k := range bubblewrapStoppers[:1] {
			if set := u[k] != nil; set == (file == "reckon-worker.service") {
				t.Errorf("%s: %s set = %v", file, k, set)
			}
		}
		if file == "reckon-worker.service" {
			for _, k := range bubblewrapStoppers {
				if u[k] != nil {
					t.Errorf("the worker's unit sets %s, which stops bubblewrap", k)
				}
			}
		}
	}
}

// TestSandboxNeedsStatedAlike: the image's io.reckon.sandbox label and
// docs/production.md name the same container options for the sandbox.
func TestSandboxNeedsStatedAlike(t *testing.T) {
	t.Parallel()
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []string{"unmask=/proc/*", "systempaths=unconfined", "procMount: Unmasked", "seccomp=unconfined", "sethostname"} {
		if !strings.Contains(string(dockerfile), opt) || !strings.Contains(string(doc), opt) {
			t.Errorf("%q: in the Dockerfile's label %v, in docs/production.md %v", opt,
				strings.Contains(string(dockerfile), opt), strings.Contains(string(doc), opt))
		}
	}
}
