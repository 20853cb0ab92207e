package kernel

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"time"
)

// EncodeOpaque makes an opaque cursor of payload (unpadded base64url).
func EncodeOpaque(payload string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(payload))
}

// DecodeOpaque returns the payload of a cursor EncodeOpaque made, and
// false for anything else. The strict decoder still skips \r and \n, so a
// cursor holding them is refused here: it is not one EncodeOpaque made
// (FuzzCursor).
func DecodeOpaque(s string) (string, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || strings.ContainsAny(s, "\r\n") {
		return "", false
	}
	return string(raw), true
}

// EncodeSeqCursor makes an opaque page cursor after the position n (a
// journal seq, a place in an index's order) of a listing; prefix keeps the
// cursors of different listings apart.
func EncodeSeqCursor(prefix string, n int64) string {
	return EncodeOpaque(prefix + strconv.FormatInt(n, 10))
}

// DecodeSeqCursor reads a cursor EncodeSeqCursor made with prefix, and
// false for anything else (the caller's error names its listing).
func DecodeSeqCursor(s, prefix string) (int64, bool) {
	raw, ok := DecodeOpaque(s)
	if !ok {
		return 0, false
	}
	rest, ok := strings.CutPrefix(raw, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest {
		return 0, false
	}
	return n, true
}

// EncodeCursor makes an opaque page cursor after the position (ts, seq)
// of a listing; prefix keeps the cursors of different listings apart.
func EncodeCursor(prefix string, ts time.Time, seq int64) string {
	return EncodeOpaque(prefix + strconv.FormatInt(ts.UnixMicro(), 10) + ":" + strconv.FormatInt(seq, 10))
}

// minCursorMicros is the earliest instant PostgreSQL's timestamptz holds
// (4714-11-24 BC, UTC), in microseconds since the Unix epoch. A cursor's
// position comes from a stored timestamp, so none EncodeCursor made lies
// before it; a hand-made one that did reached the listing's query and
// answered 500 "timestamp out of range" (and one far enough back, such as
// math.MinInt64, overflowed the driver's encoding into another position).
const minCursorMicros = -210866803200000000

// DecodeCursor reads a cursor EncodeCursor made with prefix; anything else
// is EInvalid (a client passes next_cursor back unchanged).
func DecodeCursor(s, prefix string) (time.Time, int64, error) {
	bad := Errorf(EInvalid, "cursor %q is not a cursor this API issued for this list; pass next_cursor from the same list unchanged", Abbreviate(s, 64))
	raw, ok := DecodeOpaque(s)
	if !ok {
		return time.Time{}, 0, bad
	}
	rest, ok := strings.CutPrefix(raw, prefix)
	if !ok {
		return time.Time{}, 0, bad
	}
	a, b, ok := strings.Cut(rest, ":")
	if !ok {
		return time.Time{}, 0, bad
	}
	us, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	// A listing resumes after the cursor's position, at seq+1: the
	// largest int64 would wrap around to the page's start again (a
	// journal's sequence never gets there).
	if err1 != nil || err2 != nil || seq < 0 || seq == math.MaxInt64 || us < minCursorMicros {
		return time.Time{}, 0, bad
	}
	return time.UnixMicro(us).UTC(), seq, nil
}
