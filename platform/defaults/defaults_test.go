package defaults

import (
	"testing"
	"time"
)

// TestPositive: a positive value is kept; zero and negative values take
// the default, for counts and durations alike.
func TestPositive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ v, want int }{{5, 5}, {0, 9}, {-1, 9}} {
		if got := Positive(c.v, 9); got != c.want {
			t.Errorf("Positive(%d, 9) = %d, want %d", c.v, got, c.want)
		}
	}
	if got := Positive(time.Duration(0), time.Minute); got != time.Minute {
		t.Errorf("Positive(0s, 1m) = %s", got)
	}
	if got := Positive(-time.Second, time.Minute); got != time.Minute {
		t.Errorf("Positive(-1s, 1m) = %s", got)
	}
	if got := Positive(2*time.Second, time.Minute); got != 2*time.Second {
		t.Errorf("Positive(2s, 1m) = %s", got)
	}
}
