// Package npmtest finds the pinned npm packages of testdata/npm
// (installed there by scripts/ensure-deps.sh) for the tests that drive
// real MCP servers and the official TypeScript SDK under Node.js.
package npmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns testdata/npm of the repository the test runs in, once each
// of the @modelcontextprotocol packages pkgs is installed there. The test
// is skipped where node is not installed, and fails where a package is
// missing.
func Dir(t testing.TB, pkgs ...string) string {
	t.Helper()
	needNode(t)
	dir := filepath.Join(repoRoot(t), "testdata", "npm")
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkgPath(p), "package.json")); err != nil {
			t.Fatalf("the pinned npm packages are not installed in %s: run scripts/ensure-deps.sh (npm ci there): %v", dir, err)
		}
	}
	return dir
}

// Entry returns the entry point (dist/index.js) of the MCP server
// @modelcontextprotocol/<pkg> (server-filesystem, server-memory), or of
// pkg itself when it names its scope (@cyanheads/git-mcp-server), to run
// with node.
func Entry(t testing.TB, pkg string) string {
	t.Helper()
	entry := filepath.Join(Dir(t, pkg), "node_modules", pkgPath(pkg), "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("%s is not installed: run scripts/ensure-deps.sh (npm ci in testdata/npm): %v", pkgPath(pkg), err)
	}
	return entry
}

// File returns the file rel of the installed npm package pkg, named in
// full (mcp-sqlite, @cyanheads/git-mcp-server): the entry point of a
// server that does not ship dist/index.js.
func File(t testing.TB, pkg, rel string) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "testdata", "npm")
	needNode(t)
	f := filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), filepath.FromSlash(rel))
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("%s is not installed: run scripts/ensure-deps.sh (npm ci in testdata/npm): %v", pkg, err)
	}
	return f
}

// needNode skips the test where node is not installed.
func needNode(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: this test drives MCP peers under Node.js (e.g. apt-get install nodejs npm, then scripts/ensure-deps.sh)")
	}
}

// pkgPath is pkg's folder under node_modules: @modelcontextprotocol/<pkg>
// unless pkg names its scope.
func pkgPath(pkg string) string {
	if strings.HasPrefix(pkg, "@") {
		return pkg
	}
	return filepath.Join("@modelcontextprotocol", pkg)
}

// repoRoot is the nearest directory at or above the test's working
// directory (its package's) holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod at or above %s", dir)
		}
	}
}
