package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// RetryAfterSeconds is the Retry-After of a 503: long enough for a
// database restart or failover to finish, short enough for an agent's
// retry loop.
const RetryAfterSeconds = 5

// classify turns an untyped error that is really a dependency outage (the
// database refused or dropped the connection, is shutting down, or the
// pool could not hand out a connection in time) into kernel's typed
// unavailable error, so the one status table answers 503, not 500.
func classify(err error) error {
	if kernel.ErrorCode(err) != kernel.EInternal || !storageDown(err) {
		return err
	}
	return kernel.Unavailable("the database", err)
}

// storageDown reports whether err is a connection-level failure of
// PostgreSQL rather than a fault of the request or of reckon.
func storageDown(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &pe):
		// Class 08: connection exception; 57P01-57P03: admin shutdown,
		// crash shutdown, cannot connect now (starting up).
		return pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return pgconn.SafeToRetry(err)
}
