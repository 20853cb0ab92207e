package operations

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
)

// TestLazyTx: a batch sent first begins the transaction in its own round
// trip and reads back as the caller queued it; what follows is the same
// transaction; Rollback undoes the batch's write; a CommitQuery runs even
// when nothing began the transaction.
func TestLazyTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE lazy (n int)`); err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	tx := &lazyTx{conn: conn.Conn()}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO lazy VALUES (1)`)
	b.Queue(`SELECT pg_current_xact_id()::text`)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		t.Fatalf("first result (the insert): %v", err)
	}
	var xid1 string
	if err := br.QueryRow().Scan(&xid1); err != nil {
		t.Fatalf("second result (the transaction id): %v", err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
		t.Fatalf("after the first batch the connection's status is %q, want T (in a transaction)", st)
	}
	var xid2 string
	rows, err := tx.Query(ctx, `SELECT pg_current_xact_id()::text`)
	if err != nil {
		t.Fatal(err)
	}
	if xid2, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if xid1 != xid2 {
		t.Fatalf("the batch ran in transaction %s, the next statement in %s", xid1, xid2)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("Commit after Rollback: %v, want ErrTxClosed", err)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM lazy`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rolled back, the table has %d rows (%v)", n, err)
	}

	// Committed: the write stays.
	tx = &lazyTx{conn: conn.Conn()}
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO lazy VALUES (2)`)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM lazy WHERE n = 2`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("committed, the table has %d rows of 2 (%v)", n, err)
	}

	// A failing batch leaves an aborted transaction that Commit refuses.
	tx = &lazyTx{conn: conn.Conn()}
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO lazy VALUES (3)`)
	b.Queue(`SELECT 1/0`)
	if err := tx.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("1/0 did not fail")
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("Commit of an aborted transaction: %v, want ErrTxCommitRollback", err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM lazy WHERE n = 3`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("aborted, the table has %d rows of 3 (%v)", n, err)
	}

	// Nothing began it: the CommitQuery still runs.
	tx = &lazyTx{conn: conn.Conn(), opts: pgx.TxOptions{CommitQuery: `SELECT set_config('reckon.lazy', 'ran', false)`}}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var ran string
	if err := conn.QueryRow(ctx, `SELECT current_setting('reckon.lazy')`).Scan(&ran); err != nil || ran != "ran" {
		t.Fatalf("the CommitQuery did not run: %q (%v)", ran, err)
	}
}

// TestCommitWallRefusesAnAbortedTransaction: with commitUnlockSQL as the
// commit query, COMMIT of an aborted transaction answers ROLLBACK under
// the unlock's result, which pgx then reports as a success; a wall's
// transaction (lazyTx) must refuse it instead.
func TestCommitWallRefusesAnAbortedTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx := &lazyTx{conn: conn.Conn(), opts: pgx.TxOptions{CommitQuery: commitUnlockSQL}}
	defer func() { _ = tx.Rollback(ctx) }()
	b := &pgx.Batch{}
	b.Queue("SELECT 1")
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("division by zero succeeded")
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the commit of an aborted transaction was reported as a success")
	}
}
