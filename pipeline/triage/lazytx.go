package triage

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lazyTx is a transaction whose BEGIN travels in its first batch instead
// of a round trip of its own (pgx's Batch.BeginTx). A wall's transaction
// opens with ReconcileAllTx's batch (locks and reads), so every wall
// saves one of its round trips. Once begun it is pgx's own transaction;
// a statement other than a batch as the first begins it the usual way.
type lazyTx struct {
	conn *pgx.Conn
	opts pgx.TxOptions
	tx   pgx.Tx // nil until begun
	// closed: committed or rolled back before anything began it.
	closed bool
}

var _ pgx.Tx = (*lazyTx)(nil)

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

// Commit commits. Before anything began the transaction there is nothing
// to commit, but a CommitQuery of the options still runs: it may do more
// than commit (a run's last wall releases the run's lock with it).
func (t *lazyTx) Commit(ctx context.Context) error {
	if t.tx != nil {
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

// Begin opens a savepoint in the transaction.
func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
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

// QueryRow runs sql in the transaction.
func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	tx, err := t.begun(ctx)
	if err != nil {
		return errRow{err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

// CopyFrom copies rows in the transaction.
func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares a statement on the connection.
func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// LargeObjects is the transaction's large objects; it begins the
// transaction (without a context: pgx's signature has none).
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.begun(context.Background())
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

// Conn is the connection the transaction runs on.
func (t *lazyTx) Conn() *pgx.Conn { return t.conn }

// errRow is a row that could not be read: err on Scan.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
