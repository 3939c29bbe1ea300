package cron

import (
	"errors"
	"fmt"
)

// Sentinels that *Error wraps, for callers that branch on the kind of
// problem with errors.Is.
var (
	// ErrInvalid: the expression is not a supported cron expression.
	ErrInvalid = errors.New("invalid cron expression")
	// ErrTooFrequent: the cron fires more often than every five minutes,
	// the finest interval unit.
	ErrTooFrequent = errors.New("cron fires more often than every 5 minutes")
	// ErrUnitTooCoarse: an explicit interval unit is coarser than the unit
	// the cron implies and partial intervals are not allowed.
	ErrUnitTooCoarse = errors.New("interval unit is coarser than the cron")
)

// Error reports a problem with one cron expression. It quotes the expression
// as the user wrote it and unwraps to one of the sentinels above (Kind) and,
// when there is one, to the underlying cause.
type Error struct {
	Expr   string // the expression as given to Parse
	Kind   error  // ErrInvalid, ErrTooFrequent or ErrUnitTooCoarse
	Detail string // what exactly is wrong, for people
	Cause  error  // underlying error, e.g. from the cron library; may be nil
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("cron %q: %v", e.Expr, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap exposes Kind and Cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

func invalid(expr, detail string, cause error) *Error {
	return &Error{Expr: expr, Kind: ErrInvalid, Detail: detail, Cause: cause}
}
