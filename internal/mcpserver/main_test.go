package mcpserver

import (
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestMain fails the package's tests when they leave goroutines running.
func TestMain(m *testing.M) { reckontest.Main(m) }
