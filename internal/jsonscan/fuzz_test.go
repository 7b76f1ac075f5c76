package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/jsonscan"
)

// FuzzArray checks jsonscan against encoding/json on arbitrary input: Array agrees with
// json.Valid and json.Unmarshal into []json.RawMessage, Members with json.Unmarshal into
// map[string]json.RawMessage, and the value helpers with json.Unmarshal into their types.
func FuzzArray(f *testing.F) {
	for _, s := range []string{
		``, `[]`, ` [ ] `, `[1,2,3]`, `{}`, `{"a":1}`, `"x"`, `null`, `-0.5e-3`, `[1,]`, `[01]`,
		`[{"pid": 12345, "create_time": 1764428400.12, "boot_id": "f868fc94-0228-4df5-b061-9b3c65d40f4c", "start_ticks": 1234567, "isolated": false, "owner": null}]`,
		`[{"p\u0069d":1,"a":{"b":[true,false,null]},"a":2}]`,
		`["\ud83d\ude00\ud800\udc00\u00e9\"\\\/\b\f\n\r\t"]`,
		"[\"\xff\xed\xa0\x80\", {\"\xff\":1, \"\xfe\":2}]",
		`[1e400, 12.0, 1e3, -9223372036854775808, 9223372036854775808, 9.3e18]`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`["\u12", "\a"]`, `[NaN, -Infinity, {"a": Infinity}]`, `[-NaN]`, `[Nan]`, `[-Inf]`, "[\"\t\"]", `[tru]`, `{"a" 1}`,
	} {
		f.Add([]byte(s))
	}
	// Longer documents, with escapes, the bytes that follow them, and non-ASCII keys and values.
	f.Add(ledgerDoc(3))
	f.Add([]byte(`["` + strings.Repeat(`a\"#\\]\u00e9\ud83d\ude00`, 8) + `", {"` + strings.Repeat(`k\"#`, 20) + `": [1.5e3, "` + strings.Repeat("\xff\xc3\xa9", 30) + `"]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got [][]byte
		err := jsonscan.Array(data, func(e []byte) error {
			got = append(got, e)
			return nil
		})
		std := withoutPythonWords(data)
		valid := json.Valid(std)
		switch {
		case err == nil:
			if !valid {
				t.Fatalf("Array(%q) = nil, but json.Valid = false", data)
			}
			if !bytes.Equal(std, data) {
				break // encoding/json cannot read the words: validity is all there is to compare
			}
			var want []json.RawMessage
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("Array(%q) = nil, but json.Unmarshal: %v", data, err)
			}
			if len(got) != len(want) {
				t.Fatalf("Array(%q) passed %d elements, json.Unmarshal found %d", data, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("Array(%q) element %d = %q, json.Unmarshal has %q", data, i, got[i], want[i])
				}
				checkValue(t, got[i], 0)
			}
		case errors.Is(err, jsonscan.ErrNotArray):
			if !valid {
				t.Fatalf("Array(%q) = ErrNotArray, but json.Valid = false", data)
			}
			if !bytes.Equal(std, data) {
				break
			}
			checkValue(t, bytes.Trim(data, " \t\r\n"), 0)
		case errors.Is(err, jsonscan.ErrSyntax):
			if valid {
				t.Fatalf("Array(%q) = %v, but json.Valid = true", data, err)
			}
			var se *jsonscan.SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(data) {
				t.Fatalf("Array(%q) = %v, want a *SyntaxError with an offset in the input", data, err)
			}
		default:
			t.Fatalf("Array(%q) = %v, want nil, ErrNotArray or ErrSyntax", data, err)
		}
		// Whatever the input, nothing may panic and the helpers must agree with encoding/json.
		jsonscan.Members(data, func(k, v []byte) bool { return true })
		checkHelpers(t, data)
	})
}

// pythonWords matches the number words Python's json module reads and writes beyond RFC 8259,
// and the -NaN it does not. withoutPythonWords puts a 0 between spaces in the place of each: a
// bare 0 would join a number before it ("1Infinity", invalid, would read as the valid "10").
var pythonWords = regexp.MustCompile(`-?NaN|-?Infinity`)

// withoutPythonWords replaces each of Python's number words with 0, and -NaN, which Python
// refuses, with something encoding/json refuses too, so that json.Valid of the result is what
// jsonscan must answer for data.
func withoutPythonWords(data []byte) []byte {
	return pythonWords.ReplaceAllFunc(data, func(w []byte) []byte {
		if string(w) == "-NaN" {
			return []byte("-x")
		}
		return []byte(" 0 ")
	})
}

// checkValue checks Members and the helpers on v, a valid JSON value without surrounding space,
// and on the values nested in it.
func checkValue(t *testing.T, v []byte, depth int) {
	t.Helper()
	checkHelpers(t, v)
	if depth > 16 {
		return
	}
	got := map[string][]byte{}
	isObject := jsonscan.Members(v, func(k, val []byte) bool {
		got[string(k)] = val
		checkValue(t, val, depth+1)
		return true
	})
	if isObject != (v[0] == '{') {
		t.Fatalf("Members(%q) = %v", v, isObject)
	}
	if isObject {
		var want map[string]json.RawMessage
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", v, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Members(%q) found keys %q, json.Unmarshal %q", v, keys(got), keys(want))
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || !bytes.Equal(g, w) {
				t.Fatalf("Members(%q)[%q] = %q, json.Unmarshal has %q", v, k, g, w)
			}
		}
	}
	if v[0] == '[' {
		if err := jsonscan.Array(v, func(e []byte) error { checkValue(t, e, depth+1); return nil }); err != nil {
			t.Fatalf("Array(%q) of a nested array = %v", v, err)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// checkHelpers checks String, AppendString, Float, Int, Bool and IsNull on arbitrary bytes v.
func checkHelpers(t *testing.T, v []byte) {
	t.Helper()
	valid := json.Valid(v)
	s, ok := jsonscan.String(v)
	isString := valid && len(v) > 0 && v[0] == '"' && v[len(v)-1] == '"'
	if ok != isString {
		t.Fatalf("String(%q) reports %v, want %v", v, ok, isString)
	}
	if ok {
		var want string
		if err := json.Unmarshal(v, &want); err != nil || s != want {
			t.Fatalf("String(%q) = %q, json.Unmarshal = %q, %v", v, s, want, err)
		}
		if b, ok := jsonscan.AppendString([]byte("x"), v); !ok || string(b) != "x"+want {
			t.Fatalf("AppendString(x, %q) = %q, %v; want %q", v, b, ok, "x"+want)
		}
	} else if _, ok := jsonscan.AppendString(nil, v); ok {
		t.Fatalf("AppendString(%q) reports true, String false", v)
	}

	isNumber := valid && len(v) > 0 && (v[0] == '-' || isDigit(v[0])) && isDigit(v[len(v)-1])
	f, ok := jsonscan.Float(v)
	var wantF float64
	wantOK := isNumber && json.Unmarshal(v, &wantF) == nil
	if ok != wantOK || ok && f != wantF {
		t.Fatalf("Float(%q) = %v, %v; want %v, %v", v, f, ok, wantF, wantOK)
	}

	n, ok := jsonscan.Int(v)
	wantN, wantOK := refInt(v, isNumber)
	if ok != wantOK || n != wantN {
		t.Fatalf("Int(%q) = %d, %v; want %d, %v", v, n, ok, wantN, wantOK)
	}

	b, ok := jsonscan.Bool(v)
	if ok != (string(v) == "true" || string(v) == "false") || b != (string(v) == "true") {
		t.Fatalf("Bool(%q) = %v, %v", v, b, ok)
	}
	if jsonscan.IsNull(v) != (string(v) == "null") {
		t.Fatalf("IsNull(%q) = %v", v, !(string(v) == "null"))
	}
}

// refInt is Int's rule spelled out with strconv: an integer literal must fit an int64 exactly;
// any other number counts when its float64 value is integral and in the int64 range.
func refInt(v []byte, isNumber bool) (int64, bool) {
	if !isNumber {
		return 0, false
	}
	if !bytes.ContainsAny(v, ".eE") {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, false
		}
		return n, true
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= -math.MinInt64 {
		return 0, false
	}
	return int64(f), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
