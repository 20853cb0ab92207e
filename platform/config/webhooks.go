package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Webhook is one endpoint of RECKON_WEBHOOKS (or RECKON_WEBHOOKS_FILE):
// where the notifications of its events go, signed with Key
// (docs/configuration.md#webhooks).
type Webhook struct {
	URL string
	// Key is the HMAC-SHA256 key: the secret's base64 after "whsec_"
	// decoded, or the secret's own bytes.
	Key []byte
	// Events are the events the endpoint is sent, each one of
	// WebhookEvents.
	Events []string
}

// WebhookEvents are the events an endpoint may ask for
// (docs/api.md#webhooks).
var WebhookEvents = []string{"attention", "settled", "run.awaiting", "conflict.parked"}

// MinWebhookKeyBytes is the shortest signing key accepted: the Standard
// Webhooks convention asks for 24 to 64 random bytes.
const MinWebhookKeyBytes = 24

// webhookSecretPrefix marks a base64 secret (the Standard Webhooks
// serialization); any other secret is used as its own bytes.
const webhookSecretPrefix = "whsec_"

// webhookEntry is one entry as written in the JSON.
type webhookEntry struct {
	URL    string   `json:"url"`
	Secret string   `json:"secret"`
	Events []string `json:"events"`
}

// loadWebhooks reads RECKON_WEBHOOKS or the file RECKON_WEBHOOKS_FILE
// names (not both). set says one of them is set, even to an empty list: a
// process that delivers webhooks then registers exactly these endpoints.
func loadWebhooks(get func(string, string) string) (hooks []Webhook, set bool, err error) {
	inline, file := get("RECKON_WEBHOOKS", ""), get("RECKON_WEBHOOKS_FILE", "")
	switch {
	case inline != "" && file != "":
		return nil, false, &Error{"RECKON_WEBHOOKS", "and RECKON_WEBHOOKS_FILE are both set; set one"}
	case inline != "":
		hooks, err = parseWebhooks("RECKON_WEBHOOKS", []byte(inline))
		return hooks, true, err
	case file != "":
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, false, &Error{"RECKON_WEBHOOKS_FILE", fmt.Sprintf("cannot be read: %v", err)}
		}
		hooks, err = parseWebhooks("RECKON_WEBHOOKS_FILE", raw)
		return hooks, true, err
	}
	return nil, false, nil
}

// parseWebhooks reads a JSON list of {"url", "secret", "events"}. An
// error names the variable, the entry and the field, never the secret nor
// the whole URL (an incoming-webhook URL is a secret too).
func parseWebhooks(variable string, raw []byte) ([]Webhook, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var entries []webhookEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, &Error{variable, fmt.Sprintf("is not a JSON list of {\"url\", \"secret\", \"events\"}: %s", oneLine(err))}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{variable, "holds more than one JSON value; write one list"}
	}
	out := make([]Webhook, 0, len(entries))
	seen := map[string]int{}
	for i, e := range entries {
		h, err := e.check()
		if err != nil {
			return nil, &Error{variable, fmt.Sprintf("entry %d: %s", i, err)}
		}
		if j, dup := seen[h.URL]; dup {
			return nil, &Error{variable, fmt.Sprintf("entry %d: \"url\" is the URL of entry %d already; list an endpoint once, with all its events", i, j)}
		}
		seen[h.URL] = i
		out = append(out, h)
	}
	return out, nil
}

// check validates one entry and returns it as a Webhook.
func (e webhookEntry) check() (Webhook, error) {
	u, err := url.Parse(e.URL)
	switch {
	case e.URL == "":
		return Webhook{}, fmt.Errorf("\"url\" is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return Webhook{}, fmt.Errorf("\"url\" must be an absolute http or https URL")
	}
	key, err := webhookKey(e.Secret)
	if err != nil {
		return Webhook{}, err
	}
	if len(e.Events) == 0 {
		return Webhook{}, fmt.Errorf("\"events\" must list at least one of %s", strings.Join(WebhookEvents, ", "))
	}
	for k, ev := range e.Events {
		if !slices.Contains(WebhookEvents, ev) {
			return Webhook{}, fmt.Errorf("\"events\"[%d] must be one of %s, got %q", k, strings.Join(WebhookEvents, ", "), ev)
		}
		if slices.Index(e.Events, ev) != k {
			return Webhook{}, fmt.Errorf("\"events\"[%d] repeats %q", k, ev)
		}
	}
	return Webhook{URL: e.URL, Key: key, Events: slices.Clone(e.Events)}, nil
}

// webhookKey is the signing key of secret: whsec_<base64> decoded, or the
// secret's bytes.
func webhookKey(secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("\"secret\" is required: every notification is signed (whsec_<base64> or at least %d bytes)", MinWebhookKeyBytes)
	}
	key := []byte(secret)
	if b64, ok := strings.CutPrefix(secret, webhookSecretPrefix); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, fmt.Errorf("\"secret\" starts with %s but the rest is not standard base64", webhookSecretPrefix)
		}
	}
	if len(key) < MinWebhookKeyBytes {
		return nil, fmt.Errorf("\"secret\" is a key of %d bytes; at least %d are required (e.g. whsec_ and the base64 of 32 random bytes)", len(key), MinWebhookKeyBytes)
	}
	return key, nil
}

// oneLine folds an error into one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
