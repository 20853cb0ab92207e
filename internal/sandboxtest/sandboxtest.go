// Package sandboxtest gives tests directories that run_command's sandbox
// can use. A worker running as root drops to an unprivileged user before
// it starts bubblewrap, and bubblewrap resolves the workspace path as that
// user, so every directory above a workspace must be searchable by it;
// testing's per-test directories are private (0700) to the test's user.
package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns a fresh directory, removed at cleanup, below directories
// every user may search: a data directory or a workspace for tests that
// run commands in the real sandbox.
func Dir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(filepath.Dir(d), 0o711); err != nil {
		t.Fatal(err)
	}
	return d
}
