// Package apperr is Playhead's application error: a code that says what kind of failure it
// is, and a message safe to show to the client. The HTTP layer maps codes to status codes in
// one place (httpserver.ErrorHandler); nothing else decides a status code.
package apperr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// Code classifies an application error.
type Code string

// The error codes. Each maps to one HTTP status.
const (
	Invalid              Code = "invalid"                // malformed request: 400
	Unauthenticated      Code = "unauthenticated"        // missing or bad credentials: 401
	Forbidden            Code = "forbidden"              // authenticated but not allowed: 403
	NotFound             Code = "not_found"              // no such thing, or not visible to the caller: 404
	Timeout              Code = "timeout"                // the client was too slow sending its request: 408
	Conflict             Code = "conflict"               // the state does not allow it: 409
	TooLarge             Code = "too_large"              // body or file over its limit: 413
	UnsupportedMediaType Code = "unsupported_media_type" // the body's Content-Type is not one the route takes: 415
	RangeNotSatisfiable  Code = "range_not_satisfiable"  // a byte range past the end of an object: 416
	Unprocessable        Code = "unprocessable"          // well-formed but out of range: 422
	TooManyRequests      Code = "too_many_requests"      // rate limited: 429
	Unavailable          Code = "unavailable"            // shutting down or a dependency is down: 503
	Internal             Code = "internal"               // a bug or an unexpected failure: 500
)

// Error is an error with a code and a client-safe message.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain; for a database error whose
// SQLSTATE says the input was at fault (see sqlStateCode), that input code; Unavailable when
// the database could not be reached or did not answer in time (see DependencyDown); otherwise
// Internal.
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	if code, _, ok := fromSQLState(err); ok {
		return code
	}
	if DependencyDown(err) {
		return Unavailable
	}
	return Internal
}

// DependencyDown reports whether err says a dependency (the database) is away rather than
// that the request or the code is wrong: a network error (connection refused or reset, a
// dial or read timeout), a context that ended (a lookup's own timeout, a request cancelled by
// a stop), or a SQLSTATE of class 08 (connection exception), 53300 (too many connections) or
// 57P01–57P03 (the server shutting down or starting up). Such a request answers 503 with
// Retry-After: trying again later can succeed.
func DependencyDown(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if e, ok := errors.AsType[sqlStateError](err); ok {
		state := e.SQLState()
		return strings.HasPrefix(state, "08") || state == "53300" || state == "57P01" || state == "57P02" || state == "57P03"
	}
	return false
}

// MessageOf returns the client-safe message of err: the *Error's message, a generic one naming
// the SQLSTATE for an input-class database error, or a generic one for anything else (its text
// may leak internals).
func MessageOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	if _, state, ok := fromSQLState(err); ok {
		return fmt.Sprintf("a value in the request cannot be stored (SQLSTATE %s)", state)
	}
	if DependencyDown(err) {
		return "the database is unavailable; retry later"
	}
	return "internal error"
}

// FromDatabase reports whether err is a database error that CodeOf maps to a client error:
// the request reached the database with a value no check at the edge refused. Callers log it,
// because each one is a missing check.
func FromDatabase(err error) bool {
	if _, ok := errors.AsType[*Error](err); ok {
		return false
	}
	_, _, ok := fromSQLState(err)
	return ok
}

// sqlStateError is a database error that carries its SQLSTATE (pgconn.PgError does), seen
// through an interface so that this package depends on no driver.
type sqlStateError interface {
	error
	SQLState() string
}

func fromSQLState(err error) (Code, string, bool) {
	e, ok := errors.AsType[sqlStateError](err)
	if !ok {
		return "", "", false
	}
	state := e.SQLState()
	code, ok := sqlStateCode(state)
	return code, state, ok
}

// sqlStateCode maps the SQLSTATEs that mean "the input was wrong" to a client error, so that a
// field without its own check at the edge answers 4xx rather than 500: class 22, data
// exceptions (22021 a NUL or invalid UTF-8 byte in text, 22P02 bad syntax for a type, 22003 a
// number out of range, 22001 a string too long…); class 23, integrity constraints (a unique key
// taken is a conflict, the others — not null, foreign key, check — are unprocessable input);
// and 54000, a value too large for an index. Everything else (connection failures, deadlocks,
// syntax errors in our own SQL) stays a 500: those are our faults, not the client's. PHERA is
// Playhead's own (migration 00027): a write naming an erased member, whose token the node had
// not refused yet (the erasure committed while the request ran): 401, as its next request.
func sqlStateCode(state string) (Code, bool) {
	switch {
	case state == "PHERA":
		return Unauthenticated, true
	case state == "23505", state == "23P01":
		return Conflict, true
	case strings.HasPrefix(state, "22"), strings.HasPrefix(state, "23"), state == "54000":
		return Unprocessable, true
	}
	return "", false
}
