package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// client talks to the dev stack's API over the loopback, as any agent or
// operator would.
type client struct {
	base     string // http://127.0.0.1:port
	agent    string // bearer token of role agent (ingest)
	operator string // bearer token of role operator (runs, reading)
	http     *http.Client
}

// statusError is a non-2xx answer.
type statusError struct {
	Status  int
	Message string
}

func (e *statusError) Error() string { return fmt.Sprintf("API answered %d: %s", e.Status, e.Message) }

// refused says whether err is the API refusing the request (4xx other than
// 408/429): retrying the same request cannot help, so the soak stops.
func refused(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && se.Status != http.StatusRequestTimeout && se.Status != http.StatusTooManyRequests
}

func (c *client) do(ctx context.Context, method, path string, q url.Values, token string, body any, out any) (int, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = string(raw)
		}
		return resp.StatusCode, &statusError{Status: resp.StatusCode, Message: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// ingest posts a batch with the agent token; the results come in the
// batch's order.
func (c *client) ingest(ctx context.Context, events []kernel.Event) ([]kernel.IngestResult, error) {
	var out struct {
		Results []kernel.IngestResult `json:"results"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/events", nil, c.agent, map[string]any{"events": events}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(events) {
		return nil, fmt.Errorf("ingest answered %d results for %d events", len(out.Results), len(events))
	}
	return out.Results, nil
}

// startRun starts a run under a client-chosen id (idempotent: the same
// plan again answers the existing run).
func (c *client) startRun(ctx context.Context, project, runID string, plan json.RawMessage) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/runs", nil, c.operator,
		map[string]any{"project": project, "run_id": runID, "plan": plan}, nil)
	return err
}

// runView is GET /v1/runs/{run_id}.
type runView struct {
	Status string         `json:"status"`
	Events []kernel.Event `json:"events"`
}

func (c *client) run(ctx context.Context, project, runID string) (runView, error) {
	var v runView
	_, err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), url.Values{"project": {project}}, c.operator, nil, &v)
	return v, err
}

// listedOp is an item of GET /v1/agent/operations.
type listedOp struct {
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	State       string `json:"state"`
}

// listing returns every unresolved operation of project, all pages.
func (c *client) listing(ctx context.Context, project string) ([]listedOp, error) {
	var all []listedOp
	cursor := ""
	for {
		q := url.Values{"project": {project}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Operations []listedOp `json:"operations"`
			NextCursor string     `json:"next_cursor"`
		}
		if _, err := c.do(ctx, http.MethodGet, "/v1/agent/operations", q, c.operator, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Operations...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// healthy says whether /healthz answers 200.
func (c *client) healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, "", nil, nil)
	return err == nil
}
