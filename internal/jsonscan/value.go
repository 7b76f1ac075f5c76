package jsonscan

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Int returns the value of the JSON number v when that value is an integer that fits an int64.
// An integer literal must fit exactly; a literal with a fraction or exponent (12.0, 1e3) counts
// when its float64 value is integral and in [-2⁶³, 2⁶³), which is the ledger's rule. It reports
// false for 12.5, "12", an overflowing literal and anything else.
func Int(v []byte) (int64, bool) {
	if n, ok := smallInt(v); ok {
		return n, true
	}
	if !isNumber(v) {
		return 0, false
	}
	for _, c := range v {
		if c == '.' || c == 'e' || c == 'E' {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
				return 0, false
			}
			return int64(f), true
		}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// smallInt decodes the common case, an integer literal of at most 18 digits, which cannot
// overflow an int64.
func smallInt(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	d := v
	if neg {
		d = v[1:]
	}
	if len(d) == 0 || len(d) > 18 || d[0] == '0' && len(d) > 1 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// Float returns the value of the JSON number v. It reports false for anything that is not a
// JSON number and for a number beyond the float64 range, which [encoding/json.Unmarshal] also
// refuses.
func Float(v []byte) (float64, bool) {
	if f, ok := smallFloat(v); ok {
		return f, true
	}
	if !isNumber(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// smallFloat decodes the common case, a number without exponent and with at most 15 digits, the
// way strconv does first: both the digits as an integer and the power of ten are exact in a
// float64, so one division rounds correctly (Clinger's fast path).
func smallFloat(v []byte) (float64, bool) {
	i := 0
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		i = 1
	}
	if i >= len(v) || v[i] == '0' && i+1 < len(v) && v[i+1] != '.' {
		return 0, false // empty, or a leading zero: the slow path decides
	}
	var m uint64
	start := i
	for ; i < len(v) && isDigit(v[i]); i++ {
		m = m*10 + uint64(v[i]-'0')
	}
	n := i - start
	frac := 0
	if i < len(v) && v[i] == '.' {
		i++
		for start = i; i < len(v) && isDigit(v[i]); i++ {
			m = m*10 + uint64(v[i]-'0')
		}
		frac = i - start
		if frac == 0 {
			return 0, false
		}
	}
	if n == 0 || i != len(v) || n+frac > 15 {
		return 0, false
	}
	f := float64(m) / pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}

// pow10 holds the powers of ten that smallFloat divides by, all exact in a float64.
var pow10 = [16]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

func isNumber(v []byte) bool {
	// Rejected up front: null, strings and the other literals are the common non-numbers, and
	// scanNumber would build an error (with fmt) to say so.
	d := v
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	// NaN and ±Infinity, valid in a document (see the package doc), are no number to decode.
	if len(d) == 0 || !isDigit(d[0]) {
		return false
	}
	end, err := scanNumber(v, 0)
	return err == nil && end == len(v)
}

// String returns the value of the JSON string literal v, unescaped as [encoding/json.Unmarshal]
// would: bytes that are not UTF-8 and unpaired surrogate escapes become U+FFFD. It reports false
// unless v is exactly one valid string literal. It allocates only the result.
func String(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if i := stringStop(v, 1, stopString|stopNonASCII); i == len(v)-1 && v[i] == '"' {
		return string(v[1:i]), true
	}
	b, ok := appendString(make([]byte, 0, len(v)), v)
	if !ok {
		return "", false
	}
	// b is never written again, so the string may share its memory, as strings.Builder does.
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// AppendString appends the value of the JSON string literal v, unescaped as [String] does, to
// dst. It reports false unless v is exactly one valid string literal; dst may then hold part of
// the value. With a reused dst it allocates nothing.
func AppendString(dst, v []byte) ([]byte, bool) {
	return appendString(dst, v)
}

func appendString(dst, v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return dst, false
	}
	i := 1
	for {
		j := stringStop(v, i, stopString|stopNonASCII)
		dst = append(dst, v[i:j]...)
		if j >= len(v) {
			return dst, false
		}
		switch c := v[j]; {
		case c == '"':
			return dst, j == len(v)-1
		case c >= utf8.RuneSelf:
			// Like encoding/json, keep valid UTF-8 and replace each byte of anything else. A
			// multi-byte sequence cannot run into the closing quote, whose byte is ASCII.
			r, n := utf8.DecodeRune(v[j:])
			if r == utf8.RuneError && n == 1 {
				dst = utf8.AppendRune(dst, r)
			} else {
				dst = append(dst, v[j:j+n]...)
			}
			i = j + n
			continue
		case c != '\\':
			return dst, false
		}
		j++
		if j >= len(v) {
			return dst, false
		}
		i = j + 1
		switch c := v[j]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(v, j+1)
			if r < 0 {
				return dst, false
			}
			i = j + 5
			if utf16.IsSurrogate(r) {
				// Like encoding/json: a valid pair is one rune, anything else U+FFFD.
				r2 := rune(-1)
				if i+1 < len(v) && v[i] == '\\' && v[i+1] == 'u' {
					r2 = hex4(v, i+2)
				}
				if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
	}
}

// hex4 decodes the four hexadecimal digits at v[i:], or returns -1.
func hex4(v []byte, i int) rune {
	if len(v)-i < 4 {
		return -1
	}
	var r rune
	for _, c := range v[i : i+4] {
		d := hexVal[c]
		if d < 0 {
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}

// Bool returns the value of the JSON literal true or false; ok is false for anything else.
func Bool(v []byte) (value, ok bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// IsNull reports whether v is the JSON literal null.
func IsNull(v []byte) bool { return string(v) == "null" }
