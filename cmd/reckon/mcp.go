package main

import (
	"context"
	"os"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
)

// runMCPTestServer is reckon's test MCP server (kernel/mcpserver).
func runMCPTestServer(ctx context.Context, args []string) error {
	return mcpserver.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}
