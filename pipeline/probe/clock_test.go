package probe

import (
	"time"

	"github.com/seed-7bc021c3/reckon/pipeline"
)

// clockAt is a database clock read at now(), with the sweeper's clock
// agreeing with it: its Now is now().
func clockAt(now func() time.Time) pipeline.Clock {
	t := now()
	return pipeline.Clock{Read: t, Before: t, After: t, Local: now}
}

// clocked is run with the database clock read at now().
func clocked(run Run) Run {
	run.Clock = clockAt(now)
	return run
}

// journaled is a pointer to t, a tool.started's commit time.
func journaled(t time.Time) *time.Time { return &t }
