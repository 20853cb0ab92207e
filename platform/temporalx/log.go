package temporalx

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/rs/zerolog"
	sdklog "go.temporal.io/sdk/log"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// SDKLogger adapts zerolog to the Temporal SDK's logger. The SDK's
// key-value pairs become fields of the zerolog event.
func SDKLogger(l zerolog.Logger) sdklog.Logger { return sdkLogger{l: l} }

type sdkLogger struct{ l zerolog.Logger }

var (
	_ sdklog.Logger     = sdkLogger{}
	_ sdklog.WithLogger = sdkLogger{}
)

func (s sdkLogger) Debug(msg string, kv ...any) { withKV(s.l.Debug(), kv).Msg(msg) }
func (s sdkLogger) Info(msg string, kv ...any)  { withKV(s.l.Info(), kv).Msg(msg) }
func (s sdkLogger) Warn(msg string, kv ...any)  { withKV(s.l.Warn(), kv).Msg(msg) }
func (s sdkLogger) Error(msg string, kv ...any) { withKV(s.l.Error(), kv).Msg(msg) }

// With returns a logger that adds kv to every entry.
func (s sdkLogger) With(kv ...any) sdklog.Logger {
	c := s.l.With()
	for i := 0; i < len(kv); i += 2 {
		key, val := kvPair(kv, i)
		c = c.Interface(key, val)
	}
	return sdkLogger{l: c.Logger()}
}

func withKV(e *zerolog.Event, kv []any) *zerolog.Event {
	if e == nil {
		return nil // level disabled; zerolog's nil event is a no-op
	}
	for i := 0; i < len(kv); i += 2 {
		key, val := kvPair(kv, i)
		if err, ok := val.(error); ok {
			e = e.AnErr(key, err)
			continue
		}
		e = e.Interface(key, val)
	}
	return e
}

func kvPair(kv []any, i int) (string, any) {
	key, ok := kv[i].(string)
	if !ok {
		key = fmt.Sprint(kv[i])
	}
	if i+1 >= len(kv) {
		return SnakeKey(key), nil
	}
	return field(key, kv[i+1])
}

// field maps a Temporal key and value onto reckon's log convention:
// snake_case keys (the SDK's RunID is run_id, Error is error) and units in
// the key (a duration is <key>_ms, in milliseconds).
func field(key string, val any) (string, any) {
	key = SnakeKey(key)
	if d, ok := val.(time.Duration); ok {
		return strings.TrimSuffix(key, "_ms") + "_ms", float64(d.Microseconds()) / 1000
	}
	return key, val
}

// SnakeKey spells a log key in snake_case: RunID → run_id, WorkflowType →
// workflow_type, wf-namespace → wf_namespace, error stays error.
func SnakeKey(k string) string {
	var b strings.Builder
	rs := []rune(k)
	for i, r := range rs {
		switch {
		case r == '-' || r == ' ' || r == '.':
			b.WriteByte('_')
		case unicode.IsUpper(r):
			// A word starts at an upper-case letter after a lower-case one,
			// or before a lower-case one inside an acronym (IDType → id_type).
			if i > 0 && rs[i-1] != '_' && rs[i-1] != '-' && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				(i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// serverLogger adapts zerolog to the Temporal server's logger, for the
// embedded server. Once stopping is set, errors are
// logged at debug: while the server stops, its internal workers keep calling
// services that are already down and log each failure as an error, which
// is noise on every clean shutdown.
type serverLogger struct {
	l        zerolog.Logger
	stopping *atomic.Bool
}

func (s serverLogger) errorEvent() *zerolog.Event {
	if s.stopping != nil && s.stopping.Load() {
		return s.l.Debug()
	}
	return s.l.Error()
}

var (
	_ serverlog.Logger     = serverLogger{}
	_ serverlog.WithLogger = serverLogger{}
)

func (s serverLogger) Debug(msg string, tags ...tag.Tag) { withTags(s.l.Debug(), tags).Msg(msg) }
func (s serverLogger) Info(msg string, tags ...tag.Tag)  { withTags(s.l.Info(), tags).Msg(msg) }
func (s serverLogger) Warn(msg string, tags ...tag.Tag)  { withTags(s.l.Warn(), tags).Msg(msg) }
func (s serverLogger) Error(msg string, tags ...tag.Tag) {
	if notYetHealthy(tags) || msg == nexusInitFallback {
		withTags(s.l.Debug(), tags).Msg(msg)
		return
	}
	withTags(s.errorEvent(), tags).Msg(msg)
}
func (s serverLogger) DPanic(msg string, tags ...tag.Tag) { withTags(s.errorEvent(), tags).Msg(msg) }

// Panic logs and panics, as the server's contract requires.
func (s serverLogger) Panic(msg string, tags ...tag.Tag) {
	withTags(s.l.Error(), tags).Msg(msg)
	panic(msg)
}

// Fatal logs and panics rather than exiting, so that an embedding process
// can unwind and close its own resources.
func (s serverLogger) Fatal(msg string, tags ...tag.Tag) {
	withTags(s.l.Error(), tags).Msg(msg)
	panic("temporal server fatal: " + msg)
}

// With returns a logger that adds tags to every entry.
func (s serverLogger) With(tags ...tag.Tag) serverlog.Logger {
	c := s.l.With()
	for _, t := range tags {
		k, v := field(t.Key(), t.Value())
		c = c.Interface(k, v)
	}
	return serverLogger{l: c.Logger(), stopping: s.stopping}
}

// nexusInitFallback is what the server logs when its first load of the
// Nexus endpoints from matching fails, typically "Not enough hosts to serve
// the request" while matching has not yet joined the membership ring of a
// server still starting; it then loads them from persistence instead
// (common/nexus/endpoint_registry.go, getAllEndpointsMatchingWithPersistenceFallback),
// so nothing is lost. A loaded machine can show it on a restart; it stays
// visible at debug level.
const nexusInitFallback = "error from matching when initializing Nexus endpoint cache"

// notYetHealthy reports a call the frontend refused because it was still
// starting: the server's own internal worker dials it during Start, before
// the health check turns SERVING, and the server logs that refusal as a
// service failure. Start waits for SERVING, so it is never a caller's
// failure; it stays visible at debug level.
func notYetHealthy(tags []tag.Tag) bool {
	for _, t := range tags {
		// The server's error tags encode their value as the error's text.
		if t.Key() == "error" && strings.Contains(fmt.Sprint(t.Value()), "Frontend is not healthy yet") {
			return true
		}
	}
	return false
}

func withTags(e *zerolog.Event, tags []tag.Tag) *zerolog.Event {
	if e == nil {
		return nil
	}
	for _, t := range tags {
		k, v := field(t.Key(), t.Value())
		if err, ok := v.(error); ok {
			e = e.AnErr(k, err)
			continue
		}
		e = e.Interface(k, v)
	}
	return e
}
