// Package mcpserver is reckon's test MCP server (`reckon mcp-test-server`):
// a small, correct MCP server whose one consequential tool, create_issue,
// is idempotent by the reckon idempotency key carried in the request's
// _meta. Probes and drills use it to check what happened to an operation
// whose outcome the kernel could not observe; any MCP client can talk to it
// over stdio or streamable HTTP.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// IdempotencyKeyMeta is the _meta key under which clients pass the
// idempotency key of a consequential call. reckon's MCP client
// (kernel/mcptool) sets it to "<project>/<run_id>/<operation_id>".
const IdempotencyKeyMeta = "dev.reckon/idempotency-key"

// HTTPPath is where the streamable HTTP endpoint is served.
const HTTPPath = "/mcp"

// CreateIssueArgs are create_issue's arguments.
type CreateIssueArgs struct {
	Title string `json:"title" jsonschema:"the issue title (non-empty)"`
	Body  string `json:"body,omitempty" jsonschema:"the issue body"`
}

// CreateIssueResult is create_issue's structured output.
type CreateIssueResult struct {
	Issue Issue `json:"issue"`
	// Replayed is true when the idempotency key had been seen before and
	// the original issue is returned instead of a new one.
	Replayed bool `json:"replayed"`
}

// SlowCreateIssueArgs are slow_create_issue's arguments.
type SlowCreateIssueArgs struct {
	Title   string `json:"title" jsonschema:"the issue title (non-empty)"`
	Body    string `json:"body,omitempty" jsonschema:"the issue body"`
	DelayMS int    `json:"delay_ms" jsonschema:"milliseconds to wait after the issue is stored, before answering (at most 600000)"`
}

// maxDelayMS bounds slow_create_issue's wait (10 minutes).
const maxDelayMS = 600_000

// GetIssueArgs are get_issue's arguments.
type GetIssueArgs struct {
	ID string `json:"id" jsonschema:"the issue id, e.g. ISS-1"`
}

// LookupOperationArgs are lookup_operation's arguments.
type LookupOperationArgs struct {
	Key string `json:"key" jsonschema:"the idempotency key (reckon: <project>/<run_id>/<operation_id>)"`
}

// LookupOperationResult answers what happened to an idempotency key.
type LookupOperationResult struct {
	Key string `json:"key"`
	// Status is "completed" (the key produced Issue) or "never_seen".
	Status string `json:"status"`
	Tool   string `json:"tool,omitempty"`
	// Args are the arguments the key was first used with.
	Args  map[string]any `json:"args,omitempty"`
	Issue *Issue         `json:"issue,omitempty"`
	At    *time.Time     `json:"at,omitempty"`
}

// NewServer returns the MCP server over store: create_issue,
// slow_create_issue, create_issue_confirmed, get_issue and
// lookup_operation.
func NewServer(store *Store) *mcp.Server {
	s := NewPlainServer(store)
	addLookup(s, store)
	return s
}

// NewPlainServer is NewServer without lookup_operation, as most MCP
// servers are: nothing can ask it what happened to a call (drills of
// operations no probe can decide).
func NewPlainServer(store *Store) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "reckon-mcp-test-server", Version: "1"}, &mcp.ServerOptions{
		Instructions: "create_issue is consequential. Pass an idempotency key in params._meta[\"" + IdempotencyKeyMeta +
			"\"]: a retry with the same key returns the original issue; lookup_operation tells what happened to a key.",
	})
	f := false
	mcp.AddTool(s, &mcp.Tool{
		Name: "create_issue",
		Description: "Create an issue. Consequential. Idempotent by params._meta[\"" + IdempotencyKeyMeta + "\"]: " +
			"the same key with the same arguments returns the original issue and creates nothing; " +
			"the same key with different arguments is an error naming the conflict.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f, IdempotentHint: false, OpenWorldHint: &f},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in CreateIssueArgs) (*mcp.CallToolResult, CreateIssueResult, error) {
		return createIssue(ctx, store, "create_issue", req, in.Title, in.Body, 0)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "slow_create_issue",
		Description: "create_issue, then wait delay_ms before answering: the issue and its idempotency key are stored " +
			"before the wait, so a client that dies during it leaves an effect it never heard of (crash-window tests).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f, IdempotentHint: false, OpenWorldHint: &f},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in SlowCreateIssueArgs) (*mcp.CallToolResult, CreateIssueResult, error) {
		if in.DelayMS < 0 || in.DelayMS > maxDelayMS {
			return nil, CreateIssueResult{}, fmt.Errorf("delay_ms: must be between 0 and %d, got %d", maxDelayMS, in.DelayMS)
		}
		return createIssue(ctx, store, "slow_create_issue", req, in.Title, in.Body, time.Duration(in.DelayMS)*time.Millisecond)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_issue",
		Description: "Return one issue by id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in GetIssueArgs) (*mcp.CallToolResult, Issue, error) {
		iss, err := store.Issue(in.ID)
		return nil, iss, err
	})
	addConfirmedCreate(s, store)
	return s
}

// addLookup adds lookup_operation over store to s.
func addLookup(s *mcp.Server, store *Store) {
	f := false
	mcp.AddTool(s, &mcp.Tool{
		Name:        "lookup_operation",
		Description: "Tell what happened to an idempotency key: status \"completed\" with the stored result, or \"never_seen\".",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in LookupOperationArgs) (*mcp.CallToolResult, LookupOperationResult, error) {
		if in.Key == "" {
			return nil, LookupOperationResult{}, errors.New("key: must not be empty")
		}
		op, iss, found, err := store.Lookup(in.Key)
		if err != nil {
			return nil, LookupOperationResult{}, err
		}
		if !found {
			return nil, LookupOperationResult{Key: in.Key, Status: "never_seen"}, nil
		}
		var args map[string]any
		if err := json.Unmarshal(op.Args, &args); err != nil {
			return nil, LookupOperationResult{}, fmt.Errorf("store: key %q has invalid args: %w", in.Key, err)
		}
		at := op.CreatedAt
		return nil, LookupOperationResult{Key: in.Key, Status: "completed", Tool: op.Tool, Args: args, Issue: &iss, At: &at}, nil
	})
}

// createIssue is create_issue and slow_create_issue on behalf of tool: the
// issue and its idempotency key are stored, then the answer waits delay.
func createIssue(ctx context.Context, store *Store, tool string, req *mcp.CallToolRequest, title, body string, delay time.Duration) (*mcp.CallToolResult, CreateIssueResult, error) {
	key, err := idempotencyKey(req)
	if err != nil {
		return nil, CreateIssueResult{}, err
	}
	if strings.TrimSpace(title) == "" {
		return nil, CreateIssueResult{}, errors.New("title: must not be empty")
	}
	iss, replayed, err := store.createIssue(tool, key, title, body)
	if err != nil {
		return nil, CreateIssueResult{}, err
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, CreateIssueResult{}, fmt.Errorf("canceled after issue %s was stored: %w", iss.ID, ctx.Err())
		}
	}
	return nil, CreateIssueResult{Issue: iss, Replayed: replayed}, nil
}

// idempotencyKey reads the key from the request's _meta; absent means the
// caller asked for no deduplication.
func idempotencyKey(req *mcp.CallToolRequest) (string, error) {
	if req == nil || req.Params == nil {
		return "", nil
	}
	v, ok := req.Params.GetMeta()[IdempotencyKeyMeta]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("_meta[%q] must be a string, got %T", IdempotencyKeyMeta, v)
	}
	return s, nil
}

// DefaultStorePath is the store used without --store: under RECKON_DATA_DIR
// (default ./.reckon), the same data directory as the rest of reckon.
func DefaultStorePath(getenv func(string) string) string {
	dir := strings.TrimSpace(getenv("RECKON_DATA_DIR"))
	if dir == "" {
		dir = "./.reckon"
	}
	return filepath.Join(dir, "mcp-test-server", "issues.json")
}

// Main is `reckon mcp-test-server [--store PATH] [--http ADDR]`: it serves
// stdio (stdin/stdout) until the client closes stdin, or streamable HTTP at
// http://ADDR/mcp until ctx ends. With --http it writes one line
// "listening on http://HOST:PORT/mcp" to stderr (ADDR may use port 0).
func Main(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp-test-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storePath := fs.String("store", "", "issue store file (default $RECKON_DATA_DIR/mcp-test-server/issues.json)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:9000) instead of stdio")
	conformance := fs.Bool("conformance", false, "serve the official MCP conformance suite's server scenarios instead of the issue tools (no store)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var srv *mcp.Server
	if *conformance {
		srv = ConformanceServer()
	} else {
		var err error
		if srv, err = issueServer(*storePath); err != nil {
			return err
		}
	}
	if *httpAddr == "" {
		err := srv.Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: stdout})
		if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	hs := &http.Server{
		Handler:           Handler(srv),
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Fprintf(stderr, "listening on http://%s%s\n", ln.Addr(), HTTPPath)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := hs.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) {
			// Shutdown waits for connections to go idle, and a streamable
			// session's event stream that its client's DELETE did not end
			// never does: past the grace, such streams are cut.
			return hs.Close()
		}
		return err
	}
}

// issueServer is NewServer over the store at path (the default store when
// empty).
func issueServer(path string) (*mcp.Server, error) {
	if path == "" {
		// Read directly rather than through kernel/config: this server must
		// not refuse to start over unrelated reckon settings.
		path = DefaultStorePath(os.Getenv)
	}
	store, err := OpenStore(path)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	return NewServer(store), nil
}

// Handler serves srv as streamable HTTP at HTTPPath.
func Handler(srv *mcp.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	return mux
}
