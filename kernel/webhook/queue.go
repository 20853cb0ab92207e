package webhook

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Queue queues on b the statement that writes ns, one row per endpoint
// that asked for each one's event, for the caller to send in the
// transaction of the facts they announce (insertSQL says what it skips).
// Nothing is queued for no notifications.
func Queue(b *pgx.Batch, ns []Notification) {
	if len(ns) == 0 {
		return
	}
	ids, events, bodies := make([]string, len(ns)), make([]string, len(ns)), make([]string, len(ns))
	srcs, evIDs, digests := make([]string, len(ns)), make([]string, len(ns)), make([][]byte, len(ns))
	for i, n := range ns {
		ids[i], events[i], bodies[i] = n.MsgID, n.Event, string(n.Body)
		srcs[i], evIDs[i], digests[i] = n.Key.SourceID, n.Key.EventID, n.Digest
	}
	b.Queue(insertSQL, ids, events, bodies, srcs, evIDs, digests)
}

// BatchSender is what Write writes through: a transaction (the caller's),
// or a pool or connection (a transaction of its own).
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Write writes ns through db (Queue's statement, sent alone).
func Write(ctx context.Context, db BatchSender, ns []Notification) error {
	if len(ns) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	Queue(b, ns)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("webhook: write %d notifications: %w", len(ns), err)
	}
	return nil
}
