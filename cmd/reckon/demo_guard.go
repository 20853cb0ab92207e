package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/adapter/gateway"
	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// demoGuardRun shows the retry guard in the MCP gateway: an agent's
// slow_create_issue times out after the tracker stored the issue; its
// identical retry is held and not sent; an operator checks the tracker and
// rules the first call occurred; a third identical call is answered
// "already happened", not sent either. The tracker holds one issue.
func demoGuardRun(ctx context.Context, d *demoEnv) error {
	store, err := mcpserver.OpenStore(filepath.Join(d.Stack.Cfg.DataDir, "demo-tracker.json"))
	if err != nil {
		return err
	}
	upURL, stopUp, err := demoServe(mcpserver.Handler(mcpserver.NewServer(store)))
	if err != nil {
		return err
	}
	defer stopUp()
	g, err := gateway.New(ctx, d.Stack.Pool, gateway.Config{Project: d.Project, Log: d.Stack.Log,
		Servers: []mcptool.ServerConfig{{Name: "tracker", URL: upURL + mcpserver.HTTPPath, Timeout: "1s"}},
		Guard:   d.Stack.Operations})
	if err != nil {
		return err
	}
	defer g.Close()
	gwURL, stopGw, err := demoServe(g.Handler())
	if err != nil {
		return err
	}
	defer stopGw()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "demo-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gwURL + gateway.HTTPPath, MaxRetries: -1}, nil)
	if err != nil {
		return fmt.Errorf("connect to the gateway: %w", err)
	}
	defer cs.Close()

	args := map[string]any{"title": "Refund order 5521", "delay_ms": 3000}
	for _, what := range []string{"the call (the tracker stores the issue, then answers after the gateway's 1 s timeout)", "the agent retries it at once"} {
		if _, err := demoGatewayCall(ctx, d, cs, what, args); err != nil {
			return err
		}
	}
	twin, err := d.Stack.Operations.Guard(ctx, operations.GuardParams{Project: d.Project, Tool: mcptool.Prefix + "slow_create_issue", Args: mustJSON(args)})
	if err != nil || twin.Operation == nil {
		return fmt.Errorf("the guard does not name the first call: %+v %v", twin, err)
	}
	issues, err := store.Issues()
	if err != nil || len(issues) == 0 {
		return fmt.Errorf("the tracker holds no issue: %v", err)
	}
	note := fmt.Sprintf("the tracker shows issue %s %q", issues[0].ID, issues[0].Title)
	if _, err := demoAPI(ctx, d, http.MethodPost, "/v1/agent/operations/reconcile", nil, map[string]any{"project": d.Project,
		"run_id": twin.Operation.RunID, "operation_id": twin.Operation.OperationID, "effect": "occurred", "note": note}); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "an operator rules %s of run %s occurred: %s\n", twin.Operation.OperationID, twin.Operation.RunID, note)
	res, err := demoGatewayCall(ctx, d, cs, "the agent calls it a third time", args)
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("the third call was not answered \"already happened\"")
	}
	if issues, err = store.Issues(); err != nil || len(issues) != 1 {
		return fmt.Errorf("the tracker holds %d issues for three identical calls, want 1 (%v)", len(issues), err)
	}
	fmt.Fprintf(d.Out, "the tracker holds 1 issue for the three identical calls: the retry guard held one and answered one\n")
	return nil
}

// demoGatewayCall makes one slow_create_issue call through the gateway
// and prints what the agent is told.
func demoGatewayCall(ctx context.Context, d *demoEnv, cs *mcp.ClientSession, what string, args map[string]any) (*mcp.CallToolResult, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "slow_create_issue", Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(d.Out, "%s: isError=%v\n  %s\n", what, res.IsError, mcptool.ContentText(res.Content))
	return res, nil
}

// demoServe serves h on a free loopback port until stop.
func demoServe(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}
