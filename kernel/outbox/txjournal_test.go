package outbox_test

import (
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// The in-process journal must take the one-commit delivery path; a
// signature drift would silently fall back to two commits per batch.
var _ outbox.TxJournal = (*journal.Store)(nil)
