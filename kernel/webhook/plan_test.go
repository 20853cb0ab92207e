package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// TestInsertPlanUsesIndexes: the notifications' insert, on its generic
// plan with sequential scans off (as the outbox's Enqueue runs it), finds
// the endpoints and the outbox rows through indexes, and is costed below
// the JIT threshold: a statement left with a sequential scan is costed
// past it there and compiled at every reconcile (a second each, measured).
func TestInsertPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	tx := s.Tx(t)
	for _, q := range []string{
		`INSERT INTO webhook_endpoints (id, events) VALUES ('wh_a', '{settled,attention}'), ('wh_b', '{run.awaiting}')`,
		`INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
		 SELECT 's', 'e-' || g, '{}', '\x00' FROM generate_series(1, 6000) g`,
		`ANALYZE webhook_endpoints, kernel_event_outbox`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b := &pgx.Batch{}
	pgplan.Force(b, "")
	var plan []byte
	b.Queue("EXPLAIN (FORMAT JSON) "+insertSQL, []string{"msg_1"}, []string{EventSettled}, []string{"{}"},
		[]string{"s"}, []string{"e-1"}, [][]byte{{0}}).QueryRow(func(row pgx.Row) error { return row.Scan(&plan) })
	var jitAbove float64
	b.Queue(`SELECT current_setting('jit_above_cost')::float8`).QueryRow(func(row pgx.Row) error { return row.Scan(&jitAbove) })
	pgplan.Restore(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	var root []struct {
		Plan struct {
			TotalCost float64 `json:"Total Cost"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &root); err != nil || len(root) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	if strings.Contains(string(plan), `"Seq Scan"`) {
		t.Errorf("the insert scans a table sequentially:\n%s", plan)
	}
	if cost := root[0].Plan.TotalCost; cost >= jitAbove {
		t.Errorf("the insert is costed %.0f, past jit_above_cost %.0f:\n%s", cost, jitAbove, plan)
	}
}
