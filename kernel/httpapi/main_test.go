package httpapi_test

import (
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestMain fails the package's tests when they leave goroutines running.
// They start the embedded Temporal server, whose own goroutines outlive it.
func TestMain(m *testing.M) { reckontest.Main(m, reckontest.TemporalLeaks()...) }
