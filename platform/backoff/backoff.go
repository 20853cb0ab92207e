// Package backoff is the retry delay reckon's delivery loops share (the
// outbox's publisher, the webhooks' deliverer).
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Jittered is a delay drawn uniformly between base and base·2^attempts,
// the upper end capped at limit: capped exponential backoff with jitter,
// so that retries of many rows, or of many processes, spread out instead
// of arriving together. attempts 0 (or a limit at or below base) is base.
func Jittered(base, limit time.Duration, attempts int) time.Duration {
	ceil := float64(base) * math.Pow(2, float64(min(max(attempts, 0), 30)))
	if ceil > float64(limit) {
		ceil = float64(limit)
	}
	lo := float64(base)
	if ceil <= lo {
		return time.Duration(lo)
	}
	return time.Duration(lo + rand.Float64()*(ceil-lo))
}
