package main

import (
	"context"
	"os"

	"github.com/seed-7bc021c3/reckon/internal/tau2"
)

// runTau2Server is the tau2-bench retail MCP server (internal/tau2).
func runTau2Server(ctx context.Context, args []string) error {
	return tau2.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}
