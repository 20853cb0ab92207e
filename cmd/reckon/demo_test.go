package main

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
)

// TestDemo runs `reckon demo` end to end (what `make demo` does) against a
// private schema and data directory: every registered step must succeed.
func TestDemo(t *testing.T) {
	s := pgtest.New(t)
	t.Setenv("DATABASE_URL", s.URL)
	t.Setenv("RECKON_DATA_DIR", t.TempDir())
	t.Setenv("RECKON_TOKENS", "")
	t.Setenv("RECKON_LOG_LEVEL", "error")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := runDemo(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
