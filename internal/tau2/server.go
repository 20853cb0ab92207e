package tau2

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolArgs lists each tool's arguments; those in listArgs are lists of
// strings, the rest strings. Every argument is required.
var toolArgs = map[string][]string{
	"calculate":                      {"expression"},
	"cancel_pending_order":           {"order_id", "reason"},
	"exchange_delivered_order_items": {"order_id", "item_ids", "new_item_ids", "payment_method_id"},
	"find_user_id_by_email":          {"email"},
	"find_user_id_by_name_zip":       {"first_name", "last_name", "zip"},
	"get_item_details":               {"item_id"},
	"get_order_details":              {"order_id"},
	"get_product_details":            {"product_id"},
	"get_user_details":               {"user_id"},
	"list_all_product_types":         {},
	"modify_pending_order_address":   {"order_id", "address1", "address2", "city", "state", "country", "zip"},
	"modify_pending_order_items":     {"order_id", "item_ids", "new_item_ids", "payment_method_id"},
	"modify_pending_order_payment":   {"order_id", "payment_method_id"},
	"modify_user_address":            {"user_id", "address1", "address2", "city", "state", "country", "zip"},
	"return_delivered_order_items":   {"order_id", "item_ids", "payment_method_id"},
	"transfer_to_human_agents":       {"summary"},
}

var listArgs = map[string]bool{"item_ids": true, "new_item_ids": true}

// Store is a db.json the server reads and writes per call, under an
// exclusive file lock, so a stdio server started per call (as reckon's
// MCP client does) and every other process see one database.
type Store struct {
	// Path is the database file; Init, when set, is copied there the
	// first time the file is missing.
	Path, Init string
}

// Do runs tool with args against the stored database, saving it after a
// successful write.
func (s Store) Do(tool string, args map[string]any) (any, error) {
	lock, err := os.OpenFile(s.Path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tau2 store: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("tau2 store: lock: %w", err)
	}
	path := s.Path
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && s.Init != "" {
		path = s.Init
	}
	db, err := Load(path)
	if err != nil {
		return nil, err
	}
	out, err := db.Call(tool, args)
	if err != nil || !IsWrite(tool) && path == s.Path {
		return out, err
	}
	return out, s.save(db)
}

// save writes db atomically.
func (s Store) save(db *DB) error {
	b, err := json.Marshal(db)
	if err != nil {
		return fmt.Errorf("tau2 store: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), ".tau2-db-*")
	if err != nil {
		return fmt.Errorf("tau2 store: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("tau2 store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tau2 store: %w", err)
	}
	return os.Rename(tmp.Name(), s.Path)
}

// NewServer is the retail MCP server over st.
func NewServer(st Store) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tau2-retail", Version: "1"}, nil)
	for name, params := range toolArgs {
		props := map[string]any{}
		for _, p := range params {
			props[p] = map[string]any{"type": "string"}
			if listArgs[p] {
				props[p] = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
			}
		}
		schema := map[string]any{"type": "object", "properties": props, "required": append([]string{}, params...)}
		tool := &mcp.Tool{Name: name, InputSchema: schema}
		if !IsWrite(name) {
			tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		srv.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
					return errorResult(err), nil
				}
			}
			out, err := st.Do(name, args)
			if err != nil {
				return errorResult(err), nil
			}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
	}
	return srv
}

func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: " + err.Error()}}}
}

// Main serves the retail tools on stdio: reckon tau2-server --db PATH
// [--init DB.JSON].
func Main(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	fs := flag.NewFlagSet("tau2-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "the database file the tools read and write (required)")
	init := fs.String("init", "", "db.json copied to --db the first time --db is missing (tau2-bench's data/tau2/domains/retail/db.json)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *db == "" {
		return errors.New("--db: is required")
	}
	err := NewServer(Store{Path: *db, Init: *init}).Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: stdout})
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil) {
		return nil
	}
	return err
}
