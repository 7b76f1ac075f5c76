// Package jsonscan validates JSON and walks it without decoding it: it hands out subslices of
// the input and decodes a value only when asked ([Int], [Float], [String], …). It exists for the
// ledger, which parses a file of about a thousand rows on every write and must stay within a few
// milliseconds. It allocates only for errors, for [String]'s result, for object keys with escapes
// or non-ASCII bytes, and for nesting deeper than 64 levels.
//
// [Array] validates a whole document in one pass and hands out the elements of its top-level
// array. [Members] walks one such element, an object, without validating it again. The value
// helpers check all of their input and report false for anything but a well-formed value of
// their type.
//
// Validity is that of Python's json.loads, the reader of the other program that shares the
// ledger, so that the two never disagree on whether a file is corrupt: [encoding/json.Valid]'s
// RFC 8259 plus the three words Python's json.dumps writes for floats outside it, NaN, Infinity
// and -Infinity, accepted wherever a number may stand (the value helpers read them as no number,
// and they are kept byte for byte); and two choices of encoding/json.
//
//   - Bytes that are not UTF-8 are accepted inside strings. [String] and the keys that [Members]
//     passes on replace each such byte, and each unpaired surrogate escape such as \ud800, with
//     U+FFFD, as [encoding/json.Unmarshal] does.
//   - Nesting deeper than 10,000 arrays and objects is invalid.
package jsonscan
