package retention_test

import (
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

func TestMain(m *testing.M) { reckontest.Main(m) }
