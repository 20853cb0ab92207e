package kernel

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// EncodeCursor makes an opaque page cursor after the position (ts, seq)
// of a listing; prefix keeps the cursors of different listings apart.
func EncodeCursor(prefix string, ts time.Time, seq int64) string {
	raw := prefix + strconv.FormatInt(ts.UnixMicro(), 10) + ":" + strconv.FormatInt(seq, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor reads a cursor EncodeCursor made with prefix; anything else
// is EInvalid (a client passes next_cursor back unchanged).
func DecodeCursor(s, prefix string) (time.Time, int64, error) {
	bad := Errorf(EInvalid, "cursor %q is not a cursor this API issued for this list; pass next_cursor from the same list unchanged", Abbreviate(s, 64))
	// The decoder skips \r and \n even in strict mode: a cursor with them
	// is not one EncodeCursor made.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || strings.ContainsAny(s, "\r\n") {
		return time.Time{}, 0, bad
	}
	rest, ok := strings.CutPrefix(string(raw), prefix)
	if !ok {
		return time.Time{}, 0, bad
	}
	a, b, ok := strings.Cut(rest, ":")
	if !ok {
		return time.Time{}, 0, bad
	}
	us, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || seq < 0 {
		return time.Time{}, 0, bad
	}
	return time.UnixMicro(us).UTC(), seq, nil
}
