package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// JournalClient is a kernel.Journal behind the HTTP ingest API, for
// publishers that run apart from the journal.
type JournalClient struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

var _ kernel.Journal = (*JournalClient)(nil)

// NewJournalClient returns a client of the ingest API at baseURL.
func NewJournalClient(baseURL, token string) *JournalClient {
	return &JournalClient{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Ingest posts the batch to /v1/events. A 4xx is an *kernel.Error with the
// server's message; anything else is a transport error to retry.
func (c *JournalClient) Ingest(ctx context.Context, events []kernel.Event) ([]kernel.IngestResult, error) {
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post events: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("read ingest response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error      string `json:"error"`
			EventIndex *int   `json:"event_index"`
		}
		_ = json.Unmarshal(raw, &e)
		// Only 400 and 413 judge the events themselves: the publisher
		// parks what an EInvalid leaves refused one event at a time, so
		// any other 4xx (a request timeout, a rate limit, a wrong URL)
		// must stay a failure to retry, or valid events are parked.
		var code string
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			code = kernel.EInvalid
		case http.StatusUnauthorized:
			code = kernel.EUnauthorized
		case http.StatusForbidden:
			code = kernel.EForbidden
		}
		if code != "" {
			ke := kernel.Errorf(code, "ingest API %d: %s", resp.StatusCode, e.Error)
			if e.EventIndex != nil && *e.EventIndex >= 0 && *e.EventIndex < len(events) {
				return nil, kernel.RefusedEvent(*e.EventIndex, ke)
			}
			return nil, ke
		}
		return nil, fmt.Errorf("ingest API answered %d: %s", resp.StatusCode, e.Error)
	}
	var out struct {
		Results []kernel.IngestResult `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode ingest response: %w", err)
	}
	return out.Results, nil
}
