package kernel

import (
	"errors"
	"fmt"
)

// Error codes. The HTTP layer maps each to one status code in one place.
const (
	EInvalid      = "invalid"      // 400: the request or event is malformed
	EUnauthorized = "unauthorized" // 401: no or unknown credentials
	EForbidden    = "forbidden"    // 403: known caller, insufficient role
	ENotFound     = "not_found"    // 404
	EConflict     = "conflict"     // 409: same key, different content
	ETooLarge     = "too_large"    // 413
	ETimeout      = "timeout"      // 408: the request body did not arrive in time
	EUnavailable  = "unavailable"  // 503: a dependency is down
	EInternal     = "internal"     // 500
)

// Error is reckon's one application error: a code for machines and a message
// a person can act on.
type Error struct {
	Code    string
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal for
// any other non-nil error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic text for internal errors, whose details belong in logs only.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Unavailable marks err as a dependency outage (EUnavailable: 503 with
// Retry-After), keeping err in the chain for logs. Storage packages wrap
// connection failures with it so that a database outage is never a 500.
func Unavailable(what string, err error) error {
	return &unavailableError{what: what, err: err}
}

type unavailableError struct {
	what string
	err  error
}

func (u *unavailableError) Error() string { return u.what + ": " + u.err.Error() }
func (u *unavailableError) Unwrap() []error {
	return []error{&Error{Code: EUnavailable, Message: u.what + " is unavailable; retry later"}, u.err}
}

// Redacted is an error answered to its caller with public's code and
// message while its Error() (what the server logs) is detail's: for a
// refusal whose full text names what the caller may not learn, such as
// the source that owns a run another source tried to write.
func Redacted(public *Error, detail error) error {
	return &redactedError{public: public, detail: detail}
}

type redactedError struct {
	public *Error
	detail error
}

func (r *redactedError) Error() string   { return r.detail.Error() }
func (r *redactedError) Unwrap() []error { return []error{r.public, r.detail} }

// RefusedEvent marks err as the refusal of one event of a batch, the
// event at index (from 0): the events before it passed the check that
// refused it. The ingest API answers it with "event_index", so that a
// publisher delivering over HTTP can deliver the rest of its batch and
// hold back only the refused event, instead of retrying all of it for as
// long as one event is refused.
func RefusedEvent(index int, err *Error) error {
	return &refusedEvent{index: index, err: err}
}

// RefusedEventIndex returns the index RefusedEvent recorded in err's chain.
func RefusedEventIndex(err error) (int, bool) {
	var r *refusedEvent
	if errors.As(err, &r) {
		return r.index, true
	}
	return 0, false
}

type refusedEvent struct {
	index int
	err   *Error
}

func (r *refusedEvent) Error() string { return r.err.Error() }
func (r *refusedEvent) Unwrap() error { return r.err }
