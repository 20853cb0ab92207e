package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loadEnv loads the configuration from env alone: a variable not in it is
// unset.
func loadEnv(env map[string]string) (Config, error) {
	return LoadFrom(func(k string) string { return env[k] })
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := loadEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != DefaultDatabaseURL || c.HTTPAddr != "127.0.0.1:8080" || c.OperationsWindow != 168*time.Hour ||
		c.StaleAfter != 10*time.Minute || c.TriageSchedule != "@every 5m" || !filepath.IsAbs(c.DataDir) || filepath.Base(c.DataDir) != ".reckon" || c.TemporalNamespace != "default" ||
		c.SupervisorSettle != "evidence" {
		t.Fatalf("defaults: %+v", c)
	}
	if c.ToolHeartbeatTimeout != 10*time.Second {
		t.Fatalf("RECKON_TOOL_HEARTBEAT_TIMEOUT default %s, want 10s", c.ToolHeartbeatTimeout)
	}
}

func TestAwaitTimeout(t *testing.T) {
	t.Parallel()
	get := func(v string) func(string) string {
		return func(name string) string {
			if name == "RECKON_AWAIT_TIMEOUT" {
				return v
			}
			return ""
		}
	}
	for v, want := range map[string]time.Duration{"": 72 * time.Hour, "90s": 90 * time.Second, "168h": 168 * time.Hour} {
		if c, err := LoadFrom(get(v)); err != nil || c.AwaitTimeout != want {
			t.Errorf("RECKON_AWAIT_TIMEOUT=%q: got %s, %v; want %s", v, c.AwaitTimeout, err, want)
		}
	}
	for _, v := range []string{"three days", "0s", "-1h", "500ms"} {
		if _, err := LoadFrom(get(v)); err == nil || !strings.Contains(err.Error(), "RECKON_AWAIT_TIMEOUT") || strings.Contains(err.Error(), "\n") {
			t.Errorf("RECKON_AWAIT_TIMEOUT=%q: error %v, want one line naming the variable", v, err)
		}
	}
}

func TestToolHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"4s": 4 * time.Second, "1m": time.Minute} {
		c, err := loadEnv(map[string]string{"RECKON_TOOL_HEARTBEAT_TIMEOUT": v})
		if err != nil || c.ToolHeartbeatTimeout != want {
			t.Errorf("RECKON_TOOL_HEARTBEAT_TIMEOUT=%s: got %s, %v; want %s", v, c.ToolHeartbeatTimeout, err, want)
		}
	}
	for _, v := range []string{"ten seconds", "0s", "-3s"} {
		if _, err := loadEnv(map[string]string{"RECKON_TOOL_HEARTBEAT_TIMEOUT": v}); err == nil || !strings.Contains(err.Error(), "RECKON_TOOL_HEARTBEAT_TIMEOUT") {
			t.Errorf("RECKON_TOOL_HEARTBEAT_TIMEOUT=%q: error %v", v, err)
		}
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for k, v := range map[string]string{
		"RECKON_OPERATIONS_WINDOW":      "a week",
		"RECKON_STALE_AFTER":            "-5m",
		"RECKON_TRIAGE_SCHEDULE":        "every now and then",
		"RECKON_LOG_FORMAT":             "xml",
		"RECKON_LOG_LEVEL":              "loud",
		"RECKON_SUPERVISOR_BASE_URL":    "http://127.0.0.1:1/v1",
		"RECKON_SANDBOX_UNCONFINED":     "yes",
		"RECKON_SUPERVISOR_SETTLE":      "trust-the-model",
		"RECKON_TOOL_HEARTBEAT_TIMEOUT": "500ms",
		// Each of the pair without the other.
		"RECKON_TLS_CERT_FILE": "/etc/reckon/tls.crt",
		"RECKON_TLS_KEY_FILE":  "/etc/reckon/tls.key",
	} {
		_, err := loadEnv(map[string]string{k: v})
		if err == nil {
			t.Errorf("%s=%q accepted", k, v)
			continue
		}
		if !strings.Contains(err.Error(), k) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s=%q: error %q is not one line naming the variable", k, v, err)
		}
	}
}

func TestSandboxLimits(t *testing.T) {
	t.Parallel()
	c, err := loadEnv(nil)
	if err != nil || c.SandboxMaxProcs != 256 || c.SandboxMaxMemory != 1<<30 || c.SandboxMaxFileSize != 1<<30 || c.SandboxUID != 65534 || c.SandboxGID != 65534 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = loadEnv(map[string]string{"RECKON_SANDBOX_MAX_PROCS": "64", "RECKON_SANDBOX_MAX_MEMORY": "512MiB",
		"RECKON_SANDBOX_MAX_FILE_SIZE": "268435456", "RECKON_SANDBOX_UID": "990:991"})
	if err != nil || c.SandboxMaxProcs != 64 || c.SandboxMaxMemory != 512<<20 || c.SandboxMaxFileSize != 256<<20 || c.SandboxUID != 990 || c.SandboxGID != 991 {
		t.Fatalf("set: %+v %v", c, err)
	}
	for in, want := range map[string]int64{"1073741824": 1 << 30, "1G": 1 << 30, "1gib": 1 << 30, "2GB": 2 << 30, "512M": 512 << 20, "64 MiB": 64 << 20, "1T": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d %v, want %d", in, got, err, want)
		}
	}
	for k, v := range map[string]string{
		"RECKON_SANDBOX_MAX_PROCS":     "many",
		"RECKON_SANDBOX_MAX_MEMORY":    "1.5G",
		"RECKON_SANDBOX_MAX_FILE_SIZE": "10PB",
		"RECKON_SANDBOX_UID":           "0",
	} {
		_, err := loadEnv(map[string]string{k: v})
		if err == nil || !strings.Contains(err.Error(), k) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%q: %v, want one line naming the variable", k, v, err)
		}
	}
	for k, v := range map[string]string{"RECKON_SANDBOX_MAX_PROCS": "2", "RECKON_SANDBOX_MAX_MEMORY": "1M", "RECKON_SANDBOX_UID": "65534:0"} {
		if _, err := loadEnv(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q accepted: %v", k, v, err)
		}
	}
}

func TestManifestCaps(t *testing.T) {
	t.Parallel()
	c, err := loadEnv(nil)
	if err != nil || c.ManifestMaxFiles != 100000 || c.ManifestBudget != 10*time.Second {
		t.Fatalf("defaults: %d %s %v", c.ManifestMaxFiles, c.ManifestBudget, err)
	}
	c, err = loadEnv(map[string]string{"RECKON_MANIFEST_MAX_FILES": "5000", "RECKON_MANIFEST_BUDGET": "2s"})
	if err != nil || c.ManifestMaxFiles != 5000 || c.ManifestBudget != 2*time.Second {
		t.Fatalf("set: %d %s %v", c.ManifestMaxFiles, c.ManifestBudget, err)
	}
	for k, v := range map[string]string{"RECKON_MANIFEST_MAX_FILES": "0", "RECKON_MANIFEST_BUDGET": "soon"} {
		if _, err := loadEnv(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: %v, want an error naming the variable", k, v, err)
		}
	}
	if _, err := loadEnv(map[string]string{"RECKON_MANIFEST_MAX_FILES": "lots"}); err == nil {
		t.Error("a non-number cap was accepted")
	}
}

func TestEvidenceRetention(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) { return loadEnv(map[string]string{"RECKON_EVIDENCE_RETENTION": v}) }
	for v, want := range map[string]time.Duration{"": 720 * time.Hour, "168h": 168 * time.Hour, "1h": time.Hour} {
		if c, err := load(v); err != nil || c.EvidenceRetention != want {
			t.Errorf("RECKON_EVIDENCE_RETENTION=%q: got %s, %v; want %s", v, c.EvidenceRetention, err, want)
		}
	}
	for _, v := range []string{"30 days", "30d", "0s", "-1h", "59m"} {
		_, err := load(v)
		if err == nil || !strings.Contains(err.Error(), "RECKON_EVIDENCE_RETENTION") || !strings.Contains(err.Error(), v) {
			t.Errorf("RECKON_EVIDENCE_RETENTION=%q: error %v, want one naming the variable and the value", v, err)
		}
	}
}

// TestWarnings: an evidence retention shorter than the operations window
// starts (it always has) but is named at start-up; the defaults and a
// retention of at least the window warn of nothing.
func TestWarnings(t *testing.T) {
	t.Parallel()
	load := func(retention, window string) Config {
		c, err := loadEnv(map[string]string{"RECKON_EVIDENCE_RETENTION": retention, "RECKON_OPERATIONS_WINDOW": window})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if w := load("", "").Warnings(); len(w) != 0 {
		t.Errorf("defaults warn: %q", w)
	}
	if w := load("168h", "168h").Warnings(); len(w) != 0 {
		t.Errorf("retention equal to the window warns: %q", w)
	}
	w := load("1h", "")
	if got := w.Warnings(); len(got) != 1 || !strings.Contains(got[0], "RECKON_EVIDENCE_RETENTION (1h0m0s)") || !strings.Contains(got[0], "RECKON_OPERATIONS_WINDOW (168h0m0s)") {
		t.Errorf("retention 1h against the default window: warnings %q", got)
	}
}

func TestSweepLease(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"": 30 * time.Second, "3s": 3 * time.Second, "2m": 2 * time.Minute} {
		c, err := loadEnv(map[string]string{"RECKON_SWEEP_LEASE": v})
		if err != nil || c.SweepLease != want {
			t.Errorf("RECKON_SWEEP_LEASE=%q: got %s, %v; want %s", v, c.SweepLease, err, want)
		}
	}
	for _, v := range []string{"soon", "0s", "-30s", "2s"} {
		if _, err := loadEnv(map[string]string{"RECKON_SWEEP_LEASE": v}); err == nil || !strings.Contains(err.Error(), "RECKON_SWEEP_LEASE") || strings.Contains(err.Error(), "\n") {
			t.Errorf("RECKON_SWEEP_LEASE=%q: error %v, want one line naming the variable", v, err)
		}
	}
}

// TestJournalRetention: RECKON_JOURNAL_RETENTION is off unset or zero,
// a duration of at least RECKON_OPERATIONS_WINDOW otherwise; a shorter one
// stops start-up with an error naming both variables and the value, since
// it would drop the events of operations still listed.
func TestJournalRetention(t *testing.T) {
	t.Parallel()
	load := func(retention, window string) (Config, error) {
		return loadEnv(map[string]string{"RECKON_JOURNAL_RETENTION": retention, "RECKON_OPERATIONS_WINDOW": window,
			"RECKON_JOURNAL_EXPORT_DIR": "/var/lib/reckon/journal"})
	}
	for _, tc := range []struct {
		retention, window string
		want              time.Duration
	}{{"", "", 0}, {"0", "", 0}, {"0s", "24h", 0}, {"168h", "", 168 * time.Hour}, {"2160h", "168h", 2160 * time.Hour}, {"48h", "24h", 48 * time.Hour}} {
		c, err := load(tc.retention, tc.window)
		if err != nil || c.JournalRetention != tc.want || c.JournalExportDir != "/var/lib/reckon/journal" {
			t.Errorf("RECKON_JOURNAL_RETENTION=%q window %q: got %s %q, %v; want %s", tc.retention, tc.window, c.JournalRetention, c.JournalExportDir, err, tc.want)
		}
	}
	for _, tc := range []struct{ retention, window string }{{"167h", ""}, {"1h", "2h"}, {"90 days", ""}, {"-1h", ""}} {
		_, err := load(tc.retention, tc.window)
		if err == nil || !strings.Contains(err.Error(), "RECKON_JOURNAL_RETENTION") || !strings.Contains(err.Error(), tc.retention) {
			t.Errorf("RECKON_JOURNAL_RETENTION=%q window %q: error %v, want one naming the variable and the value", tc.retention, tc.window, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q is more than one line", err)
		}
	}
	if _, err := load("24h", ""); err == nil || !strings.Contains(err.Error(), "RECKON_OPERATIONS_WINDOW (168h0m0s)") {
		t.Errorf("a retention shorter than the default window: %v, want an error naming the window", err)
	}
	if c, _ := loadEnv(nil); c.JournalRetention != 0 || c.JournalExportDir != "" {
		t.Errorf("defaults: journal retention %s, export dir %q; want off", c.JournalRetention, c.JournalExportDir)
	}
}
