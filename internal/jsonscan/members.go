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
	var (
		buf []byte
		w   = noWindow // it marks non-ASCII bytes too, so that plain keys are known on sight
		j   int
		ok  bool
	)
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		start := i + 1
		if j, ok = w.find(start); !ok {
			j, w = w.next(obj, start, msb)
		}
		key := obj[start:j]
		if i = j + 1; j >= len(obj) || obj[j] != '"' {
			// An escape or a non-ASCII byte: decode the name.
			i, w = skipString(obj, start, w)
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
				if j, ok = w.find(i + 1); ok && j < len(obj) && obj[j] == '"' {
					i = j + 1
				} else {
					i, w = skipString(obj, i+1, w)
				}
			case '{', '[':
				i, w = skipContainer(obj, i, w)
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
// before data[i], or len(data) when there is none, and the window it ended in. It trusts the
// string to be valid.
func skipString(data []byte, i int, w window) (int, window) {
	for {
		if i, w = w.next(data, i, msb); i >= len(data) {
			return len(data), w
		}
		switch data[i] {
		case '"':
			return i + 1, w
		case '\\':
			i += 2
		default:
			i++
		}
	}
}

// skipContainer returns the index past the array or object at data[i], and the window it ended
// in. It trusts the value to be valid.
func skipContainer(data []byte, i int, w window) (int, window) {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			i, w = skipString(data, i+1, w)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, w
			}
		}
		i++
	}
	return i, w
}
