package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestOpsListRefusesBadLimit: `reckon ops list --limit -5` (and
// attention) is a mistake in the command line: exit 2 naming --limit,
// before any request, not dropped silently to give the caller the default
// page size instead of an error.
func TestOpsListRefusesBadLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := deadAPIEnv(t)
	for _, sub := range []string{"list", "attention"} {
		for _, limit := range []string{"-5", "-1"} {
			var stdout, stderr bytes.Buffer
			code := report(&stderr, "ops", opsMain(ctx, []string{sub, "--project", "p", "--limit", limit}, &stdout, &stderr, env))
			if code != exitUsage || !strings.Contains(stderr.String(), "--limit") {
				t.Errorf("reckon ops %s --limit %s: exit %d (want %d naming --limit), stderr %q", sub, limit, code, exitUsage, stderr.String())
			}
		}
	}
}
