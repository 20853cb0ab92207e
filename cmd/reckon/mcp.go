package main

import (
	"context"
	"os"

	"github.com/seed-7bc021c3/reckon/kernel/mcpserver"
)

func init() {
	register("mcp-test-server", "reckon's test MCP server (create_issue idempotent by _meta key; stdio, or --http ADDR)", func(ctx context.Context, args []string) error {
		return mcpserver.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	})
}
