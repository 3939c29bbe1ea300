package model

import (
	"fmt"
	"strconv"
)

// Code classifies a model-file error so callers can react to a category
// without matching message text.
type Code string

// The categories of *Error.
const (
	// CodeSyntax: the header is not well-formed (unexpected token, missing
	// comma, no MODEL keyword, ...).
	CodeSyntax Code = "syntax"
	// CodeUnterminated: a string, quoted identifier, comment or the MODEL
	// header itself is never closed.
	CodeUnterminated Code = "unterminated"
	// CodeUnknownKind: the kind is not one gapless supports.
	CodeUnknownKind Code = "unknown_kind"
	// CodeUnknownAttribute: an attribute or kind property gapless does not
	// know (or knows but does not support).
	CodeUnknownAttribute Code = "unknown_attribute"
	// CodeDuplicateAttribute: an attribute or kind property is set twice.
	CodeDuplicateAttribute Code = "duplicate_attribute"
	// CodeMissingName: the header has no name.
	CodeMissingName Code = "missing_name"
	// CodeBadName: the name is not schema.table.
	CodeBadName Code = "bad_name"
	// CodeBadCron: the cron expression does not parse, or does not fit the
	// interval unit.
	CodeBadCron Code = "bad_cron"
	// CodeBadValue: an attribute value has the wrong form (date, integer,
	// boolean, interval unit, dialect, identifier list, ...).
	CodeBadValue Code = "bad_value"
	// CodeMissingQuery: the kind needs a query and the file has none.
	CodeMissingQuery Code = "missing_query"
	// CodeUnexpectedQuery: the kind takes no query (EXTERNAL, SEED) and the
	// file has one.
	CodeUnexpectedQuery Code = "unexpected_query"
	// CodeInvalid: attributes that are each well-formed but do not fit
	// together (a required kind property missing, end before start,
	// EXTERNAL without columns, ...).
	CodeInvalid Code = "invalid"
)

// Error is a problem in a model file, located at a line and column.
//
// Its text is "file:line:col: message", the form editors and CI annotators
// recognise. Err, when set, is the underlying cause (for example the cron
// package's error) and is exposed through Unwrap; its text is already part of
// Msg.
type Error struct {
	Pos  Pos
	Code Code
	Msg  string
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	return e.Pos.String() + ": " + e.Msg
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// String renders the position as "file:line:col", or "line:col" when the
// file is unknown.
func (p Pos) String() string {
	lc := strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
	if p.File == "" {
		return lc
	}
	return p.File + ":" + lc
}

func errorf(pos Pos, code Code, format string, args ...any) *Error {
	return &Error{Pos: pos, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// wrapErr builds an *Error whose message ends with cause's text and which
// unwraps to cause.
func wrapErr(pos Pos, code Code, cause error, format string, args ...any) *Error {
	return &Error{
		Pos:  pos,
		Code: code,
		Msg:  fmt.Sprintf(format, args...) + ": " + cause.Error(),
		Err:  cause,
	}
}
