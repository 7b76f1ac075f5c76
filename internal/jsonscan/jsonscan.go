package jsonscan

import (
	"errors"
	"fmt"
)

var (
	// ErrSyntax is wrapped by the error of [Array] for input that is not valid JSON. The error is
	// a [*SyntaxError], which holds the offset.
	ErrSyntax = errors.New("jsonscan: syntax error")

	// ErrNotArray is returned by [Array] for a valid JSON document that is not an array.
	ErrNotArray = errors.New("jsonscan: not a JSON array")

	// ErrTooDeep is wrapped, beside [ErrSyntax], by the error for a document nested deeper than
	// the limit: valid or not, it was not read to its end.
	ErrTooDeep = errors.New("jsonscan: nested too deep")
)

// SyntaxError reports invalid JSON and where it was found. It wraps [ErrSyntax].
type SyntaxError struct {
	Offset int    // offset of the first byte that cannot start or continue valid JSON, or len(data)
	Msg    string // what is wrong there, such as "invalid character 'x' in string literal"
	deep   bool   // nested beyond the limit: it wraps ErrTooDeep too
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jsonscan: syntax error at offset %d: %s", e.Offset, e.Msg)
}

func (e *SyntaxError) Unwrap() []error {
	if e.deep {
		return []error{ErrSyntax, ErrTooDeep}
	}
	return []error{ErrSyntax}
}

// Array checks that data is exactly one valid JSON value, optionally surrounded by whitespace,
// and that the value is an array. Unless fn is nil, it calls fn with each element of the array
// in turn: the element's raw bytes, a subslice of data without surrounding whitespace.
//
// Array makes a single pass, so fn may already have seen elements when a syntax error turns up
// further on: treat any error as "the whole document is invalid" and drop what fn collected.
//
// The error is nil; a [*SyntaxError], which wraps [ErrSyntax]; [ErrNotArray] for a valid
// document that is not an array; or the first error fn returns, as is, which ends the scan.
func Array(data []byte, fn func(elem []byte) error) error { return ArrayDepth(data, MaxDepth, fn) }

// ArrayDepth is [Array] with another limit on nesting than [MaxDepth]: a document with more than
// maxDepth arrays and objects open at once is refused with a [*SyntaxError] that wraps
// [ErrTooDeep] too, whether or not it is valid JSON beyond that point.
func ArrayDepth(data []byte, maxDepth int, fn func(elem []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) {
		return errEOF(data)
	}
	end, err := scan(data, i, maxDepth, fn)
	if err != nil {
		return err
	}
	if end = skipSpace(data, end); end < len(data) {
		return errAt(data, end, "after top-level value")
	}
	if data[i] != '[' {
		return ErrNotArray
	}
	return nil
}

// errAt reports the unexpected byte data[i], or the end of input when i is past it. It and
// errEOF are kept out of line so that the scanning loops stay small.
//
//go:noinline
func errAt(data []byte, i int, context string) error {
	if i >= len(data) {
		return errEOF(data)
	}
	return &SyntaxError{Offset: i, Msg: fmt.Sprintf("invalid character %q %s", data[i], context)}
}

//go:noinline
func errDeep(i, maxDepth int) error {
	return &SyntaxError{Offset: i, Msg: fmt.Sprintf("nested deeper than %d levels", maxDepth), deep: true}
}

//go:noinline
func errEOF(data []byte) error {
	return &SyntaxError{Offset: len(data), Msg: "unexpected end of JSON input"}
}
