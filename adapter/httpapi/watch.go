package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/platform/httplimit"
)

// WatchService reads the verdict stream's events (*operations.Service).
type WatchService interface {
	WatchHead(ctx context.Context) (int64, error)
	WatchAfter(ctx context.Context, project, runID string, after int64, limit int) ([]operations.Watched, error)
}

var _ WatchService = (*operations.Service)(nil)

// Defaults of the verdict stream's Config fields.
const (
	// DefaultWatchPoll is how often an open stream reads the journal.
	DefaultWatchPoll = time.Second
	// DefaultMaxStreamsPerClient bounds the streams one client address
	// holds open at once.
	DefaultMaxStreamsPerClient = 8
	// watchKeepAlive is how often a quiet stream sends a comment, so that
	// proxies and clients see it alive.
	watchKeepAlive = 15 * time.Second
)

// LastEventIDHeader names the stream position a client resumes after.
const LastEventIDHeader = "Last-Event-ID"

// watch serves GET /v1/agent/operations/watch (reader): the verdict stream
// of a project (or one run) as Server-Sent Events. The first event, ready,
// carries {project, run_id, cursor}; each other is named by its journal
// type and carries operations.Watched, with its cursor (the journal seq)
// as the event's id. A client resumes after an id with Last-Event-ID; one
// without starts at the journal's head. The stream ends at the server's
// request bound and at shutdown (the client resumes), and one client
// address holds at most MaxStreamsPerClient at once (TestWatchRoute).
func (s *Server) watch(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Watch == nil {
		return unserved("the verdict stream")
	}
	q := r.URL.Query()
	project, runID := q.Get("project"), q.Get("run_id")
	if err := kernel.ValidateKey("project", project); err != nil {
		return err
	}
	if runID != "" {
		if err := kernel.ValidateKey("run_id", runID); err != nil {
			return err
		}
	}
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	release, ok := s.streams.Acquire(httplimit.ClientHost(r))
	if !ok {
		return kernel.Errorf(kernel.EUnavailable, "this client holds %d verdict streams open already, the most one client may; close one", s.maxStreams())
	}
	defer release()
	ctx := r.Context()
	if after < 0 {
		if after, err = s.cfg.Watch.WatchHead(ctx); err != nil {
			return err
		}
	}
	st := &sseWriter{w: w, rc: http.NewResponseController(w)}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	cursor := strconv.FormatInt(after, 10)
	if st.event(cursor, "ready", map[string]string{"project": project, "run_id": runID, "cursor": cursor}) != nil {
		return nil
	}
	s.stream(ctx, st, project, runID, after)
	return nil
}

// stream sends the events after position after until the client leaves,
// the request's bound or the server's shutdown.
func (s *Server) stream(ctx context.Context, st *sseWriter, project, runID string, after int64) {
	poll := time.NewTicker(s.watchPoll())
	defer poll.Stop()
	quiet := time.Now()
	for {
		evs, err := s.cfg.Watch.WatchAfter(ctx, project, runID, after, 0)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Log.Warn().Err(err).Str("project", project).Msg("verdict stream ended: journal read failed; the client resumes")
			}
			return
		}
		for _, ev := range evs {
			if st.event(ev.Cursor, ev.Event.Type, ev) != nil {
				return
			}
			after, quiet = ev.Seq, time.Now()
		}
		if len(evs) == operations.MaxWatchBatch {
			continue
		}
		if time.Since(quiet) >= watchKeepAlive {
			if st.comment("keep-alive") != nil {
				return
			}
			quiet = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.ending:
			return
		case <-poll.C:
		}
	}
}

// lastEventID reads Last-Event-ID: a journal position (-1 when absent).
func lastEventID(r *http.Request) (int64, error) {
	v := strings.TrimSpace(r.Header.Get(LastEventIDHeader))
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, kernel.Errorf(kernel.EInvalid, "%s must be an id this stream sent (a journal position), got %q", LastEventIDHeader, kernel.Abbreviate(v, 64))
	}
	return n, nil
}

func (s *Server) watchPoll() time.Duration {
	if s.cfg.WatchPoll > 0 {
		return s.cfg.WatchPoll
	}
	return DefaultWatchPoll
}

func (s *Server) maxStreams() int {
	if s.cfg.MaxStreamsPerClient != 0 {
		return s.cfg.MaxStreamsPerClient
	}
	return DefaultMaxStreamsPerClient
}

// EndStreams ends every open verdict stream now and any opened later (the
// server is shutting down: http.Server.Shutdown waits for no stream).
func (s *Server) EndStreams() { s.endOnce.Do(func() { close(s.ending) }) }

// sseWriter writes Server-Sent Events, each flushed at once.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// event writes one event: its id, name and data (v as one line of JSON).
func (s *sseWriter) event(id, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sse: marshal %s: %w", name, err)
	}
	if _, err := fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", id, name, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

// comment writes an SSE comment (a keep-alive clients ignore).
func (s *sseWriter) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.rc.Flush()
}
