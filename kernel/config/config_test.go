package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadFrom(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != DefaultDatabaseURL || c.HTTPAddr != "127.0.0.1:8080" || c.OperationsWindow != 168*time.Hour ||
		c.StaleAfter != 10*time.Minute || c.TriageSchedule != "@every 5m" || c.DataDir != "./.reckon" || c.TemporalNamespace != "default" {
		t.Fatalf("defaults: %+v", c)
	}
	if c.ToolHeartbeatTimeout != 10*time.Second {
		t.Fatalf("RECKON_TOOL_HEARTBEAT_TIMEOUT default %s, want 10s", c.ToolHeartbeatTimeout)
	}
}

func TestToolHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"4s": 4 * time.Second, "1m": time.Minute} {
		c, err := LoadFrom(func(name string) string {
			if name == "RECKON_TOOL_HEARTBEAT_TIMEOUT" {
				return v
			}
			return ""
		})
		if err != nil || c.ToolHeartbeatTimeout != want {
			t.Errorf("RECKON_TOOL_HEARTBEAT_TIMEOUT=%s: got %s, %v; want %s", v, c.ToolHeartbeatTimeout, err, want)
		}
	}
	for _, v := range []string{"ten seconds", "0s", "-3s"} {
		if _, err := LoadFrom(func(name string) string {
			if name == "RECKON_TOOL_HEARTBEAT_TIMEOUT" {
				return v
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), "RECKON_TOOL_HEARTBEAT_TIMEOUT") {
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
		"RECKON_TOOL_HEARTBEAT_TIMEOUT": "500ms",
	} {
		_, err := LoadFrom(func(name string) string {
			if name == k {
				return v
			}
			return ""
		})
		if err == nil {
			t.Errorf("%s=%q accepted", k, v)
			continue
		}
		if !strings.Contains(err.Error(), k) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s=%q: error %q is not one line naming the variable", k, v, err)
		}
	}
}
