package sandbox

import (
	"fmt"
	"os"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// stripAsEnv names a workspace the test binary, started again by
// TestStripSetIDPastUnreadableDirectories under another uid, strips and
// exits: a worker that is not root walks the workspace as itself.
const stripAsEnv = "RECKON_SANDBOX_TEST_STRIP_AS_USER"

// TestMain fails the package's tests when they leave goroutines running.
func TestMain(m *testing.M) {
	if ws := os.Getenv(stripAsEnv); ws != "" {
		if err := stripSetID(ws); err != nil {
			fmt.Println(err)
		}
		os.Exit(0)
	}
	reckontest.Main(m)
}
