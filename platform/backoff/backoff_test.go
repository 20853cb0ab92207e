package backoff

import (
	"testing"
	"time"
)

// TestJittered: every delay lies between base and base·2^attempts capped
// at limit, and the draws spread over that range.
func TestJittered(t *testing.T) {
	t.Parallel()
	base, limit := time.Second, 10*time.Second
	for attempts, hi := range map[int]time.Duration{0: time.Second, 1: 2 * time.Second, 3: 8 * time.Second, 4: limit, 40: limit, -1: time.Second} {
		lo, top := hi, time.Duration(0)
		for range 2000 {
			d := Jittered(base, limit, attempts)
			if d < base || d > hi {
				t.Fatalf("attempts %d: %s outside [%s, %s]", attempts, d, base, hi)
			}
			lo, top = min(lo, d), max(top, d)
		}
		if hi > base && (lo > base+(hi-base)/10 || top < hi-(hi-base)/10) {
			t.Errorf("attempts %d: draws within [%s, %s] of [%s, %s]", attempts, lo, top, base, hi)
		}
	}
}
