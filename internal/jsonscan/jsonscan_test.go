package jsonscan_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/jsonscan"
)

// elems runs Array over doc and returns the elements it passed on, copied.
func elems(doc string) ([]string, error) {
	var got []string
	err := jsonscan.Array([]byte(doc), func(e []byte) error {
		got = append(got, string(e))
		return nil
	})
	return got, err
}

func TestArrayValid(t *testing.T) {
	tests := []struct {
		desc string
		doc  string
		want []string
	}{
		{"empty array", `[]`, nil},
		{"empty array with space", " \t\r\n[ \n ] \n", nil},
		{"one number", `[1]`, []string{`1`}},
		{"spaces are trimmed", "[ 1 ,\n\t2\r\n, 3 ]", []string{`1`, `2`, `3`}},
		{"scalars", `[0,-0,0.5,-1.25e+10,1E-3,1e5,true,false,null,""]`,
			[]string{`0`, `-0`, `0.5`, `-1.25e+10`, `1E-3`, `1e5`, `true`, `false`, `null`, `""`}},
		{"nested", `[{"a":[1,{"b":{}}]},[[]],[{}], {} ]`, []string{`{"a":[1,{"b":{}}]}`, `[[]]`, `[{}]`, `{}`}},
		{"escapes", `["\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00\uD800"]`, []string{`"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00\uD800"`}},
		{"brackets in strings", `["]", "[{", "\"]"]`, []string{`"]"`, `"[{"`, `"\"]"`}},
		{"bytes after a quote or backslash", `["\"#", "\\]", "\\#\"]#", "` + strings.Repeat("x", 64) + `"]`,
			[]string{`"\"#"`, `"\\]"`, `"\\#\"]#"`, `"` + strings.Repeat("x", 64) + `"`}},
		{"invalid UTF-8 in a string", "[\"\xff\xfe\", \"\xed\xa0\x80\"]", []string{"\"\xff\xfe\"", "\"\xed\xa0\x80\""}},
		{"DEL and non-ASCII", "[\"\x7f é 世界\"]", []string{"\"\x7f é 世界\""}},
		{"long string", `["` + strings.Repeat("abcdefg\\n", 50) + `"]`, []string{`"` + strings.Repeat("abcdefg\\n", 50) + `"`}},
		{"row", `[{"pid": 1, "argv": "a b", "isolated": false, "x": null}]`, []string{`{"pid": 1, "argv": "a b", "isolated": false, "x": null}`}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if !json.Valid([]byte(tt.doc)) {
				t.Fatalf("test is wrong: encoding/json rejects %q", tt.doc)
			}
			got, err := elems(tt.doc)
			if err != nil {
				t.Fatalf("Array(%q) = %v", tt.doc, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Array(%q) passed %q, want %q", tt.doc, got, tt.want)
			}
		})
	}
}

// TestArrayPythonWords checks the number words Python's json.dumps writes for floats RFC 8259
// cannot hold: valid wherever a number may stand, passed on byte for byte.
func TestArrayPythonWords(t *testing.T) {
	doc := `[NaN, -Infinity, Infinity, {"create_time": NaN, "x": [-Infinity]}]`
	got, err := elems(doc)
	want := []string{`NaN`, `-Infinity`, `Infinity`, `{"create_time": NaN, "x": [-Infinity]}`}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Array(%q) = %q, %v; want %q", doc, got, err, want)
	}
	var vals []string
	jsonscan.Members([]byte(want[3]), func(k, v []byte) bool { vals = append(vals, string(v)); return true })
	if !slices.Equal(vals, []string{`NaN`, `[-Infinity]`}) {
		t.Errorf("Members passed %q", vals)
	}
	for _, w := range []string{`NaN`, `Infinity`, `-Infinity`} {
		if _, ok := jsonscan.Float([]byte(w)); ok {
			t.Errorf("Float(%s) reported a number", w)
		}
	}
}

func TestArrayNotArray(t *testing.T) {
	for _, doc := range []string{`{}`, ` {"a":[1]} `, `1`, `-0.5e3`, `"["`, `true`, `false`, "null\n", `""`} {
		if err := jsonscan.Array([]byte(doc), nil); !errors.Is(err, jsonscan.ErrNotArray) {
			t.Errorf("Array(%q) = %v, want ErrNotArray", doc, err)
		}
	}
}

func TestArraySyntax(t *testing.T) {
	tests := []struct {
		desc   string
		doc    string
		offset int
	}{
		{"empty", ``, 0},
		{"only space", "  \n", 3},
		{"unclosed", `[1,2`, 4},
		{"trailing comma", `[1,]`, 3},
		{"leading comma", `[,1]`, 1},
		{"missing comma", `[1 2]`, 3},
		{"two values", `[] []`, 3},
		{"garbage after", `[1]x`, 3},
		{"garbage after not-array", `{}x`, 2},
		{"mismatched", `[1}`, 2},
		{"mismatched nested", `[{"a":1]]`, 7},
		{"bad in later element", `[1, 2, {"a": tru}]`, 16},
		{"leading zero", `[01]`, 2},
		{"negative leading zero", `[-01]`, 3},
		{"plus", `[+1]`, 1},
		{"bare dot", `[.5]`, 1},
		{"dot without digits", `[1.]`, 3},
		{"dot then exponent", `[1.e5]`, 3},
		{"exponent without digits", `[1e]`, 3},
		{"exponent sign only", `[1e+]`, 4},
		{"minus only", `[-]`, 2},
		{"minus at end", `-`, 1},
		{"hex", `[0x10]`, 2},
		{"-NaN", `[-NaN]`, 2},
		{"NaN misspelt", `[Nan]`, 3},
		{"Infinity cut short", `[-Inf]`, 5},
		{"infinity in lower case", `[infinity]`, 1},
		{"single quotes", `['a']`, 1},
		{"unterminated string", `["abc`, 5},
		{"control char", "[\"a\tb\"]", 3},
		{"NUL", "[\"\x00\"]", 2},
		{"newline", "[\"\n\"]", 2},
		{"bad escape", `["\a"]`, 3},
		{"escaped quote only", `["\'"]`, 3},
		{"short unicode escape", `["\u12"]`, 6},
		{"bad unicode escape", `["\u12g4"]`, 6},
		{"escape at end", `["\`, 3},
		{"bad literal", `[nul]`, 4},
		{"truncated literal", `[tr`, 3},
		{"capital literal", `[True]`, 1},
		{"unquoted key", `[{a:1}]`, 2},
		{"missing colon", `[{"a" 1}]`, 6},
		{"missing value", `[{"a":}]`, 6},
		{"object trailing comma", `[{"a":1,}]`, 8},
		{"number key", `[{1:1}]`, 2},
		{"comment", `[1 /* x */]`, 3},
		{"BOM", "\xef\xbb\xbf[]", 0},
		{"vertical tab", "[\v]", 1},
		{"NUL after", "[]\x00", 2},
		{"invalid UTF-8 outside strings", "[\xff]", 1},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if json.Valid([]byte(tt.doc)) {
				t.Fatalf("test is wrong: encoding/json accepts %q", tt.doc)
			}
			_, err := elems(tt.doc)
			var se *jsonscan.SyntaxError
			if !errors.Is(err, jsonscan.ErrSyntax) || !errors.As(err, &se) {
				t.Fatalf("Array(%q) = %v, want a *SyntaxError", tt.doc, err)
			}
			if se.Offset != tt.offset {
				t.Errorf("Array(%q) = %v, want offset %d", tt.doc, err, tt.offset)
			}
		})
	}
}

// TestArrayDepth checks the nesting limit of encoding/json, counting the top-level array.
func TestArrayDepth(t *testing.T) {
	for _, depth := range []int{1, 63, 64, 65, 66, 200, 9999, 10000, 10001, 20000} {
		for _, open := range []string{"[", `{"k":`, `[{"":`} {
			closer := map[string]string{"[": "]", `{"k":`: "}", `[{"":`: "}]"}[open]
			doc := strings.Repeat(open, depth) + "1" + strings.Repeat(closer, depth)
			_, err := elems(doc)
			if got, want := err == nil || errors.Is(err, jsonscan.ErrNotArray), json.Valid([]byte(doc)); got != want {
				t.Errorf("depth %d of %q: Array = %v, but json.Valid = %v", depth, open, err, want)
			}
		}
	}
}

func TestArrayFnError(t *testing.T) {
	stop := errors.New("stop")
	var n int
	err := jsonscan.Array([]byte(`[1,2,3,4]`), func([]byte) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Errorf("Array = %v after %d calls, want stop after 2", err, n)
	}
}

// TestArrayLateError checks that an error after some elements is still reported.
func TestArrayLateError(t *testing.T) {
	got, err := elems(`[{"pid":1},{"pid":2},{"pid":3]`)
	if !errors.Is(err, jsonscan.ErrSyntax) || len(got) != 2 {
		t.Errorf("Array passed %q and returned %v, want 2 elements then ErrSyntax", got, err)
	}
}

type member struct{ key, value string }

func members(obj string) ([]member, bool) {
	var got []member
	ok := jsonscan.Members([]byte(obj), func(k, v []byte) bool {
		got = append(got, member{string(k), string(v)})
		return true
	})
	return got, ok
}

func TestMembers(t *testing.T) {
	tests := []struct {
		obj  string
		want []member
	}{
		{`{}`, nil},
		{` { } `, nil},
		{`{"a":1}`, []member{{"a", "1"}}},
		{"{ \"a\" :\n 1 , \"b\":\"x,}\" ,\"c\":[1,{\"d\":\"]\"}],\"e\":{}, \"f\":null,\"g\":true,\"h\":-1.5e3}",
			[]member{{"a", "1"}, {"b", `"x,}"`}, {"c", `[1,{"d":"]"}]`}, {"e", "{}"}, {"f", "null"}, {"g", "true"}, {"h", "-1.5e3"}}},
		{`{"p\u0069d":1,"a\"b":2,"\\":3,"\ud83d\ude00":4,"\ud800":5,"":6}`,
			[]member{{"pid", "1"}, {`a"b`, "2"}, {`\`, "3"}, {"😀", "4"}, {"\uFFFD", "5"}, {"", "6"}}},
		{"{\"\xff\":1,\"é\":2,\"a\xffb\\n\":3}", []member{{"\uFFFD", "1"}, {"é", "2"}, {"a\uFFFDb\n", "3"}}},
		{`{"a":1,"a":2}`, []member{{"a", "1"}, {"a", "2"}}},
		{`{"long key with more than eight bytes":"v"}`, []member{{"long key with more than eight bytes", `"v"`}}},
	}
	for _, tt := range tests {
		got, ok := members(tt.obj)
		if !ok || !slices.Equal(got, tt.want) {
			t.Errorf("Members(%q) = %q, %v; want %q, true", tt.obj, got, ok, tt.want)
		}
	}
	for _, v := range []string{`[]`, `1`, `"{}"`, `null`, ``} {
		if _, ok := members(v); ok {
			t.Errorf("Members(%q) = true, want false", v)
		}
	}
}

func TestMembersStop(t *testing.T) {
	var keys []string
	ok := jsonscan.Members([]byte(`{"a":1,"b":2,"c":3}`), func(k, _ []byte) bool {
		keys = append(keys, string(k))
		return string(k) != "b"
	})
	if !ok || !slices.Equal(keys, []string{"a", "b"}) {
		t.Errorf("Members = %v after keys %q, want true after a, b", ok, keys)
	}
}

func TestInt(t *testing.T) {
	tests := []struct {
		v    string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"12345", 12345, true},
		{"-12345", -12345, true},
		{"12.0", 12, true},
		{"1e3", 1000, true},
		{"1.5e1", 15, true},
		{"-2E+2", -200, true},
		{"123456789012345678", 123456789012345678, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9007199254740993", 9007199254740993, true}, // exact, though float64 cannot hold it
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"9.3e18", 0, false},
		{"-9.223372036854775808e18", math.MinInt64, true},
		{"1e400", 0, false},
		{"12.5", 0, false},
		{"1e-1", 0, false},
		{`"12"`, 0, false},
		{"012", 0, false},
		{"+1", 0, false},
		{"1 ", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"true", 0, false},
		{"0x10", 0, false},
		{"1_000", 0, false},
	}
	for _, tt := range tests {
		if got, ok := jsonscan.Int([]byte(tt.v)); got != tt.want || ok != tt.ok {
			t.Errorf("Int(%q) = %d, %v; want %d, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFloat(t *testing.T) {
	tests := []struct {
		v    string
		want float64
		ok   bool
	}{
		{"0", 0, true},
		{"1764428400.12", 1764428400.12, true},
		{"-1.5e-3", -1.5e-3, true},
		{"1E2", 100, true},
		{"1e400", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"0x1p3", 0, false},
		{".5", 0, false},
		{"1.", 0, false},
		{"01", 0, false},
		{`"1"`, 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		if got, ok := jsonscan.Float([]byte(tt.v)); got != tt.want || ok != tt.ok {
			t.Errorf("Float(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		v    string
		want string
		ok   bool
	}{
		{`""`, "", true},
		{`"f868fc94-0228-4df5-b061-9b3c65d40f4c"`, "f868fc94-0228-4df5-b061-9b3c65d40f4c", true},
		{`"a\"b\\c\/d\be\ff\ng\rh\ti"`, "a\"b\\c/d\be\ff\ng\rh\ti", true},
		{`"\u0041\u00E9\u4e16\ud83d\ude00"`, "Aé世😀", true},
		{`"\ud800"`, "\uFFFD", true},
		{`"\ud800x"`, "\uFFFDx", true},
		{`"\udc00\ud800"`, "\uFFFD\uFFFD", true},
		{`"\ud800\u0041"`, "\uFFFDA", true},
		{`"\ud800\ud800\udc00"`, "\uFFFD\U00010000", true},
		{"\"\xff\xc3\"", "\uFFFD\uFFFD", true},
		{"\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD", true},
		{"\"é 世界 \uFFFD\"", "é 世界 \uFFFD", true},
		{`"\'"`, "", false},
		{`"\x"`, "", false},
		{`"\u12"`, "", false},
		{"\"a\tb\"", "", false},
		{`"a"b"`, "", false},
		{`"abc`, "", false},
		{`"abc\"`, "", false},
		{`"`, "", false},
		{`abc`, "", false},
		{`null`, "", false},
		{` "a"`, "", false},
	}
	for _, tt := range tests {
		got, ok := jsonscan.String([]byte(tt.v))
		if got != tt.want || ok != tt.ok {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tt.v, got, ok, tt.want, tt.ok)
		}
		if want := json.Valid([]byte(tt.v)) && tt.v[0] == '"'; ok != want {
			t.Errorf("String(%q) reports %v, but it should agree with json.Valid: %v", tt.v, ok, want)
		}
		if b, ok := jsonscan.AppendString([]byte("x"), []byte(tt.v)); ok != tt.ok || ok && string(b) != "x"+tt.want {
			t.Errorf("AppendString(x, %q) = %q, %v; want %q, %v", tt.v, b, ok, "x"+tt.want, tt.ok)
		}
	}
}

func TestBoolNull(t *testing.T) {
	for _, tt := range []struct {
		v             string
		value, ok, nu bool
	}{
		{"true", true, true, false},
		{"false", false, true, false},
		{"null", false, false, true},
		{"True", false, false, false},
		{"1", false, false, false},
		{`"true"`, false, false, false},
		{"", false, false, false},
		{"nul", false, false, false},
	} {
		if value, ok := jsonscan.Bool([]byte(tt.v)); value != tt.value || ok != tt.ok {
			t.Errorf("Bool(%q) = %v, %v; want %v, %v", tt.v, value, ok, tt.value, tt.ok)
		}
		if got := jsonscan.IsNull([]byte(tt.v)); got != tt.nu {
			t.Errorf("IsNull(%q) = %v, want %v", tt.v, got, tt.nu)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	err := jsonscan.Array([]byte(`[1,x]`), nil)
	if want := `jsonscan: syntax error at offset 3: invalid character 'x' looking for beginning of value`; fmt.Sprint(err) != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}
