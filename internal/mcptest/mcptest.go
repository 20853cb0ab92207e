// Package mcptest starts `reckon mcp-test-server`'s issue tools for tests:
// an empty issue store in the test's temporary folder, served over
// streamable HTTP until the test ends.
package mcptest

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
)

// Store is an empty issue store in t's temporary folder.
func Store(t testing.TB) *mcpserver.Store {
	t.Helper()
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// IssueServer serves the issue tools over a store of their own on HTTP,
// closed when t ends; the MCP endpoint is the server's URL +
// mcpserver.HTTPPath.
func IssueServer(t testing.TB) (*mcpserver.Store, *httptest.Server) {
	t.Helper()
	store := Store(t)
	hs := httptest.NewServer(mcpserver.Handler(mcpserver.NewServer(store)))
	t.Cleanup(hs.Close)
	return store, hs
}
