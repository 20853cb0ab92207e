package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestMCPGatewayUsageErrorsExit2: `reckon mcp-gateway` follows the
// binary's exit codes like every other command: a mistake in how it was
// called (an unknown flag, a stray argument) is 2, not 1, so a supervisor
// script can tell a bad invocation from a gateway that failed.
func TestMCPGatewayUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		args      []string
		stderrHas string
	}{
		{[]string{"mcp-gateway", "--bogus"}, "-bogus"},
		{[]string{"mcp-gateway", "stray"}, "stray"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, c.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.stderrHas) {
			t.Errorf("reckon %q: exit %d (want %d), stderr %q", c.args, code, exitUsage, stderr.String())
		}
	}
}
