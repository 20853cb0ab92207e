package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// helperEnv selects what the test binary does when it is started as an MCP
// server by the code under test (one process per call, like production).
const helperEnv = "RECKON_MCPTOOL_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		// Connections and their readers must not outlive the tests.
		reckontest.Main(m)
	case "issues":
		// reckon mcp-test-server, run from the test binary.
		if err := mcpserver.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "peer":
		runPeer()
		os.Exit(0)
	case "crash":
		fmt.Fprintln(os.Stderr, "helper: refusing to start")
		os.Exit(3)
	case "silent":
		// Reads and never answers: initialize hangs.
		time.Sleep(time.Hour)
	}
	os.Exit(4)
}

// runPeer serves tools that misbehave on purpose: hang (never answers),
// fail (error result), echo (returns the _meta it got, argv and cwd).
func runPeer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "peer", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		if f := os.Getenv("PEER_MARK"); f != "" {
			_ = os.WriteFile(f, []byte("called"), 0o644)
		}
		time.Sleep(time.Hour)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the peer failed on purpose")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		wd, _ := os.Getwd()
		var open []string
		if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
			for _, e := range ents {
				if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
					open = append(open, target)
				}
			}
		}
		b, _ := json.Marshal(map[string]any{"meta": req.Params.GetMeta(), "argv": os.Args, "cwd": wd, "env": os.Getenv("PEER_VAR"), "environ": os.Environ(), "open": open})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}
