package operations

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// FuzzListingCursor: the listing's cursor decoder never panics, refuses
// with EInvalid, and what it accepts re-encodes to a cursor that decodes
// to the same position.
func FuzzListingCursor(f *testing.F) {
	for _, s := range []string{encodeCursor(position{ts: time.Unix(1700000000, 0), seq: 7}), "", "bogus", "djE6MTow", "djE6LTE6LTE", "\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		p, err := decodeCursor(c)
		if err != nil {
			if kernel.ErrorCode(err) != kernel.EInvalid {
				t.Fatalf("code %q", kernel.ErrorCode(err))
			}
			return
		}
		q, err := decodeCursor(encodeCursor(p))
		if err != nil || !q.ts.Equal(p.ts) || q.seq != p.seq {
			t.Fatalf("cursor %q: %v → %v (%v)", c, p, q, err)
		}
	})
}
