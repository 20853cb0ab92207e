package supervisor

import (
	"context"
	"sync"

	"github.com/seed-7bc021c3/reckon/pipeline"
)

// Recorder is a supervisor that keeps every wall it is handed and answers
// with the built-in supervisor's decision, so a dry-run sweep through it
// completes as usual and leaves the walls it built to be read: how the
// drills record a run's wall. It writes nothing.
type Recorder struct {
	mu    sync.Mutex
	walls []pipeline.Wall
}

var _ pipeline.Supervisor = (*Recorder)(nil)

// Name implements pipeline.Supervisor.
func (r *Recorder) Name() string { return "recorder" }

// Decide implements pipeline.Supervisor: it keeps w and decides as Builtin.
func (r *Recorder) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	r.mu.Lock()
	r.walls = append(r.walls, w)
	r.mu.Unlock()
	return Builtin{}.Decide(ctx, w)
}

// Walls returns the walls handed to Decide so far, in the order they came.
func (r *Recorder) Walls() []pipeline.Wall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pipeline.Wall(nil), r.walls...)
}
