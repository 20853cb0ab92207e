package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Watched is one event of the verdict stream: a settlement or a change of
// what needs a person, with its journal position.
type Watched struct {
	// Cursor is the stream's position after this event (its seq as
	// text): resuming after it continues with the next one.
	Cursor string `json:"cursor"`
	Seq    int64  `json:"seq"`
	// Attention says the event leaves its operation for a person: a
	// supervisor's unknown, or a verdict that asked for attention.
	Attention bool         `json:"attention"`
	Event     kernel.Event `json:"event"`
}

// MaxWatchBatch bounds the events one read of the stream returns.
const MaxWatchBatch = 200

// WatchSettle is how long an event waits in the journal before the stream
// sends it. The stream resumes after the last position it sent, and
// positions are drawn when a transaction writes, not when it commits: a
// write that commits after a later position was read would be passed
// over for good. Journal writes commit within milliseconds, so an event
// is sent once the transaction that wrote it began a second ago, and
// nothing after the first event still that fresh (TestWatchSettles).
const WatchSettle = time.Second

// WatchHead is the journal's last position: a stream that names none
// starts there.
func (s *Service) WatchHead(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, watchHeadSQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("watch: journal head: %w", err)
	}
	return seq, nil
}

// WatchAfter returns the verdict stream's events of project (one run when
// runID is set) after journal position after, in journal order, at most
// limit (MaxWatchBatch when 0 or more). TestWatchRoute.
func (s *Service) WatchAfter(ctx context.Context, project, runID string, after int64, limit int) ([]Watched, error) {
	if limit <= 0 || limit > MaxWatchBatch {
		limit = MaxWatchBatch
	}
	rows, err := s.pool.Query(ctx, watchSQL, project, runID, after, limit, WatchSettle.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", project, err)
	}
	defer rows.Close()
	var out []Watched
	for rows.Next() {
		var (
			w                   Watched
			parentSrc, parentID *string
			ts                  time.Time
		)
		e := &w.Event
		if err := rows.Scan(&w.Seq, &e.SourceID, &e.EventID, &e.RunID, &e.Type, &ts, &e.Actor, &parentSrc, &parentID, &e.Data); err != nil {
			return nil, fmt.Errorf("watch %s: scan: %w", project, err)
		}
		e.Project, e.TS = project, ts.UTC()
		if parentSrc != nil && parentID != nil {
			e.ParentEventID = &kernel.EventKey{SourceID: *parentSrc, EventID: *parentID}
		}
		w.Cursor = strconv.FormatInt(w.Seq, 10)
		w.Attention = needsPerson(*e)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("watch %s: %w", project, err)
	}
	return out, nil
}

// needsPerson says whether ev leaves its operation for a person: a
// supervisor's reconciliation unknown, or a verdict with needs_attention.
func needsPerson(ev kernel.Event) bool {
	var d struct {
		Effect         string `json:"effect"`
		NeedsAttention bool   `json:"needs_attention"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Type {
	case kernel.TypeSupervisorVerdict:
		return d.NeedsAttention
	case kernel.TypeOperationReconciled:
		return !kernel.IsOperator(ev.Actor) && d.Effect == kernel.EffectUnknown
	}
	return false
}
