package config

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestWebhooks: RECKON_WEBHOOKS and RECKON_WEBHOOKS_FILE read the same
// list; a whsec_ secret is its base64 decoded, any other its own bytes;
// unset is not the same as an empty list.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{0xab}, 32)
	list := `[{"url":"https://hooks.example/a","secret":"whsec_` + base64.StdEncoding.EncodeToString(raw) + `","events":["attention","conflict.parked"]},
	          {"url":"http://127.0.0.1:9/b","secret":"a-raw-secret-of-28-bytes-ok","events":["settled","run.awaiting"]}]`
	file := filepath.Join(t.TempDir(), "webhooks.json")
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]map[string]string{
		"inline": {"RECKON_WEBHOOKS": list},
		"file":   {"RECKON_WEBHOOKS_FILE": file},
	} {
		c, err := LoadFrom(envOf(env))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !c.WebhooksSet || len(c.Webhooks) != 2 {
			t.Fatalf("%s: %+v", name, c.Webhooks)
		}
		a, b := c.Webhooks[0], c.Webhooks[1]
		if a.URL != "https://hooks.example/a" || !bytes.Equal(a.Key, raw) || strings.Join(a.Events, ",") != "attention,conflict.parked" {
			t.Errorf("%s: first endpoint %+v", name, a)
		}
		if string(b.Key) != "a-raw-secret-of-28-bytes-ok" || strings.Join(b.Events, ",") != "settled,run.awaiting" {
			t.Errorf("%s: second endpoint %+v", name, b)
		}
	}
	c, err := LoadFrom(envOf(nil))
	if err != nil || c.WebhooksSet || c.Webhooks != nil {
		t.Fatalf("unset: %+v %v", c.Webhooks, err)
	}
	c, err = LoadFrom(envOf(map[string]string{"RECKON_WEBHOOKS": "[]"}))
	if err != nil || !c.WebhooksSet || len(c.Webhooks) != 0 {
		t.Fatalf("empty list: set %v %+v %v", c.WebhooksSet, c.Webhooks, err)
	}
}

// TestWebhooksRefused: a wrong webhook configuration stops start-up with
// one line naming the variable, the entry and the field, and never
// repeats the secret or the URL.
func TestWebhooksRefused(t *testing.T) {
	t.Parallel()
	const secret = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	entry := func(url, secret, events string) string {
		return `[{"url":"` + url + `","secret":"` + secret + `","events":` + events + `}]`
	}
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"not JSON", "hooks.example", []string{"RECKON_WEBHOOKS", "JSON list"}},
		{"an object", `{"url":"https://x"}`, []string{"RECKON_WEBHOOKS", "JSON list"}},
		{"unknown field", `[{"url":"https://hooks.example/s3cr3t","secret":"` + secret + `","events":["settled"],"name":"x"}]`, []string{"RECKON_WEBHOOKS", "unknown field"}},
		{"two values", `[] []`, []string{"RECKON_WEBHOOKS", "one list"}},
		{"no url", entry("", secret, `["settled"]`), []string{"entry 0", `"url" is required`}},
		{"relative url", entry("/hooks/s3cr3t", secret, `["settled"]`), []string{"entry 0", `"url" must be an absolute http or https URL`}},
		{"ftp url", entry("ftp://hooks.example/s3cr3t", secret, `["settled"]`), []string{"entry 0", `"url" must be`}},
		{"no secret", entry("https://hooks.example/s3cr3t", "", `["settled"]`), []string{"entry 0", `"secret" is required`}},
		{"short secret", entry("https://hooks.example/s3cr3t", "s3cr3t-short", `["settled"]`), []string{"entry 0", `"secret" is a key of 12 bytes`}},
		{"bad base64", entry("https://hooks.example/s3cr3t", "whsec_s3cr3t!!", `["settled"]`), []string{"entry 0", "not standard base64"}},
		{"no events", entry("https://hooks.example/s3cr3t", secret, `[]`), []string{"entry 0", `"events" must list`}},
		{"unknown event", entry("https://hooks.example/s3cr3t", secret, `["settled","setled"]`), []string{"entry 0", `"events"[1] must be one of attention, settled, run.awaiting, conflict.parked, got "setled"`}},
		{"repeated event", entry("https://hooks.example/s3cr3t", secret, `["settled","settled"]`), []string{"entry 0", `"events"[1] repeats`}},
		{"same url twice", `[{"url":"https://hooks.example/s3cr3t","secret":"` + secret + `","events":["settled"]},{"url":"https://hooks.example/s3cr3t","secret":"` + secret + `","events":["attention"]}]`,
			[]string{"entry 1", "URL of entry 0"}},
	} {
		_, err := LoadFrom(envOf(map[string]string{"RECKON_WEBHOOKS": tc.value}))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		msg := err.Error()
		for _, w := range append(tc.want, "RECKON_WEBHOOKS") {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", tc.name, msg, w)
			}
		}
		if strings.Contains(msg, "\n") || strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "c2VjcmV0") {
			t.Errorf("%s: %q is not one line, or repeats the URL or the secret", tc.name, msg)
		}
	}
	if _, err := LoadFrom(envOf(map[string]string{"RECKON_WEBHOOKS": "[]", "RECKON_WEBHOOKS_FILE": "/x"})); err == nil || !strings.Contains(err.Error(), "both set") {
		t.Errorf("both set: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	if _, err := LoadFrom(envOf(map[string]string{"RECKON_WEBHOOKS_FILE": missing})); err == nil || !strings.Contains(err.Error(), "RECKON_WEBHOOKS_FILE cannot be read") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"url":"https://x.example"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFrom(envOf(map[string]string{"RECKON_WEBHOOKS_FILE": bad})); err == nil || !strings.Contains(err.Error(), "RECKON_WEBHOOKS_FILE entry 0") {
		t.Errorf("bad file: %v", err)
	}
}
