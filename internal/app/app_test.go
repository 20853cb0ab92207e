package app

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An unreachable database stops start-up with one line naming DATABASE_URL,
// however many addresses the driver tried.
func TestUnreachableDatabaseIsOneLine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, create := range []bool{false, true} {
		_, err := OpenPool(ctx, "postgres://localhost:1/nothing?sslmode=disable&connect_timeout=2", create)
		if err == nil {
			t.Fatal("connected to port 1")
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, "DATABASE_URL") || !strings.Contains(msg, "make db") {
			t.Fatalf("create=%v: %q is not one line naming DATABASE_URL and the fix", create, msg)
		}
	}
	if _, err := OpenPool(ctx, "not a url ://", false); err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("malformed URL: %v", err)
	}
}
