package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// stripAsEnv names a workspace the test binary, started again by
// TestStripSetIDPastUnreadableDirectories under another uid, strips and
// exits: a worker that is not root walks the workspace as itself.
const stripAsEnv = "RECKON_SANDBOX_TEST_STRIP_AS_USER"

// TestMain fails the package's tests when they leave goroutines running,
// or commands' cgroups behind.
func TestMain(m *testing.M) {
	if ws := os.Getenv(stripAsEnv); ws != "" {
		if err := stripSetID(ws); err != nil {
			fmt.Println(err)
		}
		os.Exit(0)
	}
	reckontest.Main(cgroupsRemoved{m})
}

// cgroupsRemoved runs the tests, then fails them if a command's cgroup
// is left in the host's hierarchy, and removes the reckon-sandbox
// parents, which a worker leaves in place (another may use them; here
// another test binary may, and then they stay).
type cgroupsRemoved struct{ m *testing.M }

func (c cgroupsRemoved) Run() int {
	code := c.m.Run()
	cg, _ := newCgroups(DefaultCgroupRoot)
	if cg == nil {
		return code
	}
	for _, p := range cg.parents {
		entries, _ := os.ReadDir(p.dir)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), strconv.Itoa(os.Getpid())+"-") {
				fmt.Printf("FAIL: cgroup %s left behind\n", filepath.Join(p.dir, e.Name()))
				code = 1
			}
		}
		_ = os.Remove(p.dir)
	}
	return code
}
