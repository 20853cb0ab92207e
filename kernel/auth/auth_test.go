package auth_test

import (
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel/auth"
)

func TestTokensParsing(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a:b", "a:admin:secret-123", "a:reader:short"} {
		if _, err := auth.Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
