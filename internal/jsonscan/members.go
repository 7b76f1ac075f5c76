package jsonscan

// Members calls fn with each member of the object obj, in order, until fn returns false. It
// reports whether obj is an object; if it is not, fn is never called.
//
// key is the member's name, unescaped as [encoding/json.Unmarshal] would, and value the raw bytes
// of its value. key is valid only during the call: it aliases obj when the name has no escapes
// and is plain ASCII, and otherwise a buffer that the next member reuses. Compare it with
// switch string(key) or string(key) == "…", which do not allocate, and keep it with string(key).
// A duplicate key is passed once per occurrence; encoding/json keeps the last.
//
// obj must be valid JSON, such as an element passed on by [Array]: Members does not validate it.
// On other input it does not panic, but what it passes to fn is unspecified.
func Members(obj []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	var buf []byte
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		start := i + 1
		j := stringStop(obj, start, stopString|stopNonASCII)
		key := obj[start:j]
		if i = j + 1; j >= len(obj) || obj[j] != '"' {
			// An escape or a non-ASCII byte: decode the name.
			i = skipString(obj, start)
			buf, _ = appendString(buf[:0], obj[start-1:i])
			key = buf
		}
		if i < len(obj) && obj[i] == ':' {
			i++
		} else if i = skipSpace(obj, i); i < len(obj) && obj[i] == ':' {
			i++
		}
		i = skipSpace(obj, i)
		v := i
		if i < len(obj) {
			switch obj[i] {
			case '"':
				i = skipString(obj, i+1)
			case '{', '[':
				i = skipContainer(obj, i)
			default:
				i = skipScalar(obj, i)
			}
		}
		if !fn(key, obj[v:i]) {
			return true
		}
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		if i = skipSpace(obj, i); i >= len(obj) || obj[i] != ',' {
			break
		}
		i = skipSpace(obj, i+1)
	}
	return true
}

// skipString returns the index past the closing quote of the string whose opening quote is just
// before data[i], or len(data) when there is none. It trusts the string to be valid.
func skipString(data []byte, i int) int {
	for {
		if i = stringStop(data, i, stopString); i >= len(data) {
			return len(data)
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2
		default:
			i++
		}
	}
}

// skipContainer returns the index past the array or object at data[i]. It trusts the value to
// be valid.
func skipContainer(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			i = skipString(data, i+1)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return i
}
