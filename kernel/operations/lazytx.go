package operations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// lazyTx is a transaction whose BEGIN travels in its first batch instead
// of a round trip of its own (pgx's Batch.BeginTx). A triage wall written
// the checked way (TriageRun.WriteWall) opens its transaction with
// ReconcileAllTx's batch (locks and reads), so the wall saves one of its
// round trips. Once begun it is pgx's own transaction;
// a statement other than a batch as the first begins it the usual way.
// It is an outbox.DBTX, all that ReconcileAllTx needs.
type lazyTx struct {
	conn *pgx.Conn
	opts pgx.TxOptions
	tx   pgx.Tx // nil until begun
	// closed: committed or rolled back before anything began it.
	closed bool
}

var _ outbox.DBTX = (*lazyTx)(nil)

// begun returns the transaction, beginning it in a round trip of its own
// when nothing has yet.
func (t *lazyTx) begun(ctx context.Context) (pgx.Tx, error) {
	if t.tx != nil {
		return t.tx, nil
	}
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	tx, err := t.conn.BeginTx(ctx, t.opts)
	if err != nil {
		return nil, err
	}
	t.tx = tx
	return tx, nil
}

// SendBatch sends b in the transaction, beginning it in the same round
// trip when it has not begun. BEGIN's result is read here, so the caller
// reads b's own results, in b's order.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.tx != nil {
		return t.tx.SendBatch(ctx, b)
	}
	if t.closed {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	withBegin := &pgx.Batch{}
	withBegin.BeginTx(t.opts)
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, withBegin)
	t.tx = br.Tx()
	if _, err := br.Exec(); err != nil {
		// Close settles the transaction's state (closed when the
		// connection is outside one); Rollback does the rest.
		_ = br.Close()
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// Commit commits. A transaction an error aborted is refused here, from the
// status the connection already knows, and rolled back: a CommitQuery that
// does more than commit (the run's last wall releases the run's lock with
// it) hides COMMIT's tag, and with it the ROLLBACK PostgreSQL answers for
// such a transaction, so a rolled-back wall could be taken for a written
// one. Before anything began the transaction there is nothing to commit,
// but a CommitQuery still runs for what else it does.
func (t *lazyTx) Commit(ctx context.Context) error {
	if t.tx != nil {
		if t.conn.PgConn().TxStatus() == 'E' {
			_ = t.tx.Rollback(ctx)
			return fmt.Errorf("an earlier statement aborted the transaction; nothing was committed: %w", pgx.ErrTxCommitRollback)
		}
		return t.tx.Commit(ctx)
	}
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.opts.CommitQuery == "" {
		return nil
	}
	_, err := t.conn.Exec(ctx, t.opts.CommitQuery)
	return err
}

// Rollback rolls back; safe after Commit, as pgx's own.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.tx != nil {
		return t.tx.Rollback(ctx)
	}
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	return nil
}

// Exec runs sql in the transaction.
func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

// Query runs sql in the transaction.
func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}
