package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestOpsListRefusesBadLimit: `reckon ops list --limit -5` (and
// attention) is a mistake in the command line: exit 2 naming --limit,
// before any request. It used to be dropped silently (only a positive
// limit was sent), so the caller got the default page size instead of an
// error.
func TestOpsListRefusesBadLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	env := func(k string) string {
		if k == "RECKON_URL" {
			return dead
		}
		return ""
	}
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
