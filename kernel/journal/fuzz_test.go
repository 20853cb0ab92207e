package journal

import (
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// FuzzEventCursor: decoding never panics, accepts only what Encode makes,
// and round-trips.
func FuzzEventCursor(f *testing.F) {
	for _, s := range []string{EncodeEventCursor(0), EncodeEventCursor(42), "", "bogus", "%00", "ZXYxOi0x", "ZXYxOjAx", strings.Repeat("A", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		seq, err := DecodeEventCursor(c)
		if err != nil {
			if kernel.ErrorCode(err) != kernel.EInvalid {
				t.Fatalf("code %q", kernel.ErrorCode(err))
			}
			return
		}
		if seq < 0 || EncodeEventCursor(seq) != c {
			t.Fatalf("cursor %q decodes to %d, which encodes to %q", c, seq, EncodeEventCursor(seq))
		}
	})
}
