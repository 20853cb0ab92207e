package pglisten_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/platform/pglisten"
)

// TestListenPassesPayloads: a notification on the channel reaches got,
// and Listen returns when its context ends.
func TestListenPassesPayloads(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pglisten.Listen(ctx, s.Pool, "reckon_pglisten_test", "lost", zerolog.Nop(), func(p string) { got <- p }, nil)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for heard := false; !heard; {
		select {
		case p := <-got:
			if p != `{"project":"p","run_id":"r"}` {
				t.Fatalf("payload %q", p)
			}
			heard = true
		case <-tick.C: // until the session listens
			if _, err := s.Pool.Exec(ctx, `SELECT pg_notify('reckon_pglisten_test', '{"project":"p","run_id":"r"}')`); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("no notification reached got")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
}
