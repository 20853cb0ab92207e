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
		c.StaleAfter != 10*time.Minute || c.TriageSchedule != "@every 5m" || c.DataDir != "./.reckon" || c.TemporalNamespace != "default" ||
		c.SupervisorSettle != "evidence" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for k, v := range map[string]string{
		"RECKON_OPERATIONS_WINDOW":   "a week",
		"RECKON_STALE_AFTER":         "-5m",
		"RECKON_TRIAGE_SCHEDULE":     "every now and then",
		"RECKON_LOG_FORMAT":          "xml",
		"RECKON_LOG_LEVEL":           "loud",
		"RECKON_SUPERVISOR_BASE_URL": "http://127.0.0.1:1/v1",
		"RECKON_SANDBOX_UNCONFINED":  "yes",
		"RECKON_SUPERVISOR_SETTLE":   "trust-the-model",
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
