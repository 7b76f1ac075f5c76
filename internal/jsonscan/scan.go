package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// MaxDepth is encoding/json's maxNestingDepth: it rejects a document with more open arrays and
// objects than this, and [Array] must agree with it on what is valid.
const MaxDepth = 10000

// scan validates the JSON value that starts at data[i] and returns the index just past it. When
// the value is an array and fn is not nil, it calls fn with each element.
//
// It is a state machine with three states joined by goto: a value due, an object key due, and a
// value just ended. Open containers are tracked in st rather than by recursion, so hostile
// nesting costs no goroutine stack, and the common case, an object of scalars, loops in the
// member state alone.
func scan(data []byte, i, maxDepth int, fn func([]byte) error) (int, error) {
	var (
		st    nest
		err   error
		elem  int // start of the current element of a top-level array
		array = data[i] == '['
	)
value:
	// A value is due at data[i].
	if i >= len(data) {
		return 0, errEOF(data)
	}
	if st.n == 1 {
		elem = i
	}
	switch data[i] {
	case '{':
		if st.n >= maxDepth {
			return 0, errDeep(i, maxDepth)
		}
		if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
			i++
			goto closing
		}
		st.push(true)
		goto member
	case '[':
		if st.n >= maxDepth {
			return 0, errDeep(i, maxDepth)
		}
		if i = skipSpace(data, i+1); i < len(data) && data[i] == ']' {
			i++
			goto closing
		}
		st.push(false)
		goto value
	case '"':
		if i, err = scanString(data, i+1); err != nil {
			return 0, err
		}
	case 't', 'f', 'n':
		if i, err = scanLiteral(data, i); err != nil {
			return 0, err
		}
	default:
		if i, err = scanNumber(data, i); err != nil {
			return 0, err
		}
	}
	goto closing

member:
	// An object key is due at data[i].
	if i >= len(data) || data[i] != '"' {
		return 0, errAt(data, i, "looking for beginning of object key string")
	}
	if i, err = scanString(data, i+1); err != nil {
		return 0, err
	}
	if i < len(data) && data[i] == ':' {
		i++
	} else if i = skipSpace(data, i); i < len(data) && data[i] == ':' {
		i++
	} else {
		return 0, errAt(data, i, "after object key")
	}
	if i = skipSpace(data, i); i >= len(data) {
		return 0, errEOF(data)
	}
	switch data[i] {
	case '"':
		if i, err = scanString(data, i+1); err != nil {
			return 0, err
		}
	case '{', '[':
		goto value
	case 't', 'f', 'n':
		if i, err = scanLiteral(data, i); err != nil {
			return 0, err
		}
	default:
		if i, err = scanNumber(data, i); err != nil {
			return 0, err
		}
	}
	if i < len(data) && data[i] == ',' {
		i = skipSpace(data, i+1)
		goto member
	}

closing:
	// A value ended just before data[i].
	switch st.n {
	case 0:
		return i, nil
	case 1:
		if array && fn != nil {
			if err = fn(data[elem:i]); err != nil {
				return 0, err
			}
		}
	}
	if i = skipSpace(data, i); i >= len(data) {
		return 0, errEOF(data)
	}
	if data[i] == ',' {
		i = skipSpace(data, i+1)
		if st.top() {
			goto member
		}
		goto value
	}
	if st.top() {
		if data[i] != '}' {
			return 0, errAt(data, i, "after object member value")
		}
	} else if data[i] != ']' {
		return 0, errAt(data, i, "after array element")
	}
	st.pop()
	i++
	goto closing
}

// scanString validates the rest of a string whose opening quote is just before data[i], and
// returns the index past its closing quote.
func scanString(data []byte, i int) (int, error) {
	var err error
	for {
		if i = stringStop(data, i, stopString); i >= len(data) {
			return 0, errEOF(data)
		}
		if data[i] == '"' {
			return i + 1, nil
		}
		if i, err = scanEscape(data, i); err != nil {
			return 0, err
		}
	}
}

// The classes of bytes a string scan stops at.
const (
	stopString   = 1 << iota // '"', '\\' and control characters: what ends a run of plain bytes
	stopNonASCII             // bytes of 0x80 and above
)

// stops has, for each byte, the classes it belongs to.
var stops = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = stopString
	}
	t['"'], t['\\'] = stopString, stopString
	for c := 0x80; c < 0x100; c++ {
		t[c] = stopNonASCII
	}
	return t
}()

// stringStop returns the index of the first byte at or after data[i] in one of the classes of
// mask, or len(data).
//
// It looks at eight bytes at a time (the bytes of a ledger are mostly in strings: names, paths,
// command lines), with the word tricks of "Bit Twiddling Hacks": (x - 0x01…) & ^x & 0x80… flags
// the bytes of x that are zero, (x - n·0x01…) & ^x & 0x80… those below n (n ≤ 0x80), and x ^ c·0x01…
// makes the bytes equal to c zero. A borrow can flag a byte above a true one, never one below, so
// the lowest flag is the first byte that stops.
func stringStop(data []byte, i int, mask uint8) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(data) {
		x := binary.LittleEndian.Uint64(data[i:])
		var m uint64
		if mask&stopString != 0 {
			q, b := x^(ones*'"'), x^(ones*'\\')
			m = (x-ones*0x20)&^x | (q-ones)&^q | (b-ones)&^b
		}
		if mask&stopNonASCII != 0 {
			m |= x
		}
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(data) && stops[data[i]]&mask == 0 {
		i++
	}
	return i
}

// skipDigits returns the index of the first byte at or after data[i] that is not a decimal
// digit, or len(data).
func skipDigits(data []byte, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

// skipScalar returns the index of the first ',', ']', '}' or whitespace byte at or after
// data[i], or len(data): the end of a number or literal that starts at data[i] in valid JSON.
func skipScalar(data []byte, i int) int {
	for ; i < len(data); i++ {
		if c := data[i]; c == ',' || c == ']' || c == '}' || c <= ' ' {
			return i
		}
	}
	return i
}

// scanEscape validates the escape sequence at data[i], or reports the control character there,
// and returns the index past the sequence.
func scanEscape(data []byte, i int) (int, error) {
	if data[i] != '\\' {
		return 0, errAt(data, i, "in string literal")
	}
	i++
	if i >= len(data) {
		return 0, errEOF(data)
	}
	switch data[i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 1, nil
	case 'u':
		for k := 1; k <= 4; k++ {
			if i+k >= len(data) {
				return 0, errEOF(data)
			}
			if hexVal[data[i+k]] < 0 {
				return 0, errAt(data, i+k, "in \\u hexadecimal character escape")
			}
		}
		return i + 5, nil
	}
	return 0, errAt(data, i, "in string escape code")
}

// scanNumber validates the number at data[i] against RFC 8259's grammar,
// -? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?, or Python's NaN, Infinity and
// -Infinity, and returns the index past it.
func scanNumber(data []byte, i int) (int, error) {
	if data[i] == 'N' {
		return scanWord(data, i, "NaN")
	}
	if data[i] == '-' {
		i++
		if i >= len(data) {
			return 0, errEOF(data)
		}
	}
	switch c := data[i]; {
	case c == 'I':
		return scanWord(data, i, "Infinity")
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = skipDigits(data, i+1)
	default:
		return 0, errAt(data, i, "looking for beginning of value")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) {
			return 0, errEOF(data)
		}
		if !isDigit(data[i]) {
			return 0, errAt(data, i, "after decimal point in numeric literal")
		}
		i = skipDigits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) {
			return 0, errEOF(data)
		}
		if !isDigit(data[i]) {
			return 0, errAt(data, i, "in exponent of numeric literal")
		}
		i = skipDigits(data, i+1)
	}
	return i, nil
}

// scanLiteral validates the true, false or null that data[i] starts.
func scanLiteral(data []byte, i int) (int, error) {
	lit := "null"
	switch data[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	}
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	for k := range len(lit) {
		if i+k >= len(data) {
			return 0, errEOF(data)
		}
		if data[i+k] != lit[k] {
			return 0, errAt(data, i+k, "in literal "+lit)
		}
	}
	panic("unreachable: the literal matched after all")
}

// scanWord validates the non-standard number word (NaN, Infinity) at data[i].
func scanWord(data []byte, i int, word string) (int, error) {
	for k := range len(word) {
		if i+k >= len(data) {
			return 0, errEOF(data)
		}
		if data[i+k] != word[k] {
			return 0, errAt(data, i+k, "in literal "+word)
		}
	}
	return i + len(word), nil
}

func isDigit(c byte) bool { return c-'0' < 10 }

// spaceMask has bit c set for each JSON whitespace byte c; all are below 64.
const spaceMask = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'

// skipSpace returns the index of the first byte at or after data[i] that is not whitespace. No
// space, or the one space of Python's ", " and ": ", is decided inline.
func skipSpace(data []byte, i int) int {
	if i < len(data) && data[i] == ' ' {
		i++
	}
	if i < len(data) && data[i] <= ' ' {
		return skipSpaceLoop(data, i)
	}
	return i
}

func skipSpaceLoop(data []byte, i int) int {
	for i < len(data) && data[i] <= ' ' && spaceMask&(uint64(1)<<data[i]) != 0 {
		i++
	}
	return i
}

// nest is the stack of open containers, one bit a level (1 for an object): the innermost 64
// levels in a register, deeper ones spilled to a slice that only hostile input needs.
type nest struct {
	n     int
	bits  uint64
	spill []bool
}

func (s *nest) push(object bool) {
	if s.n >= 64 {
		s.spill = append(s.spill, s.bits>>63 != 0)
	}
	s.bits <<= 1
	if object {
		s.bits |= 1
	}
	s.n++
}

func (s *nest) pop() {
	s.n--
	s.bits >>= 1
	if s.n >= 64 {
		if s.spill[len(s.spill)-1] {
			s.bits |= 1 << 63
		}
		s.spill = s.spill[:len(s.spill)-1]
	}
}

// top reports whether the innermost open container is an object.
func (s *nest) top() bool { return s.bits&1 != 0 }

// hexVal is the value of each hexadecimal digit, and -1 for other bytes.
var hexVal = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = int8(c - 'a' + 10)
		t[c-'a'+'A'] = int8(c - 'a' + 10)
	}
	return t
}()
