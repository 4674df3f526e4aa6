// Package apperr is Playhead's application error: a code that says what kind of failure it
// is, and a message safe to show to the client. The HTTP layer maps codes to status codes in
// one place (httpserver.ErrorHandler); nothing else decides a status code.
package apperr

import (
	"errors"
	"fmt"
)

// Code classifies an application error.
type Code string

// The error codes. Each maps to one HTTP status.
const (
	Invalid         Code = "invalid"           // malformed request: 400
	Unauthenticated Code = "unauthenticated"   // missing or bad credentials: 401
	Forbidden       Code = "forbidden"         // authenticated but not allowed: 403
	NotFound        Code = "not_found"         // no such thing, or not visible to the caller: 404
	Conflict        Code = "conflict"          // the state does not allow it: 409
	TooLarge        Code = "too_large"         // body or file over its limit: 413
	Unprocessable   Code = "unprocessable"     // well-formed but out of range: 422
	TooManyRequests Code = "too_many_requests" // rate limited: 429
	Unavailable     Code = "unavailable"       // shutting down or a dependency is down: 503
	Internal        Code = "internal"          // a bug or an unexpected failure: 500
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

// CodeOf returns the code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return Internal
}

// MessageOf returns the client-safe message of err: the *Error's message, or a generic one
// for errors that are not application errors (their text may leak internals).
func MessageOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return "internal error"
}
