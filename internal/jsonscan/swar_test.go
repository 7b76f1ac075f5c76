package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// TestSWAR checks the SWAR scanners and windows against plain byte loops, on every byte value at
// every position of a word and on random data, where carries and borrows between bytes would
// show.
func TestSWAR(t *testing.T) {
	isSpecial := func(c byte, above uint64) bool {
		return c == '"' || c == '\\' || c < 0x20 || c&byte(above) != 0
	}
	isDelim := func(c byte) bool { return c == ',' || c == ']' || c == '}' || c <= ' ' }

	var inputs [][]byte
	for pos := range 9 {
		for c := range 256 {
			b := []byte("aaaaaaaaaaaaaaaa")
			if pos < 8 {
				b[pos] = byte(c)
			}
			b[pos+1] = byte(c) // a second hit just after the first, where a borrow would land
			inputs = append(inputs, b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\"\\\x00\x1f !09:;,]}az\x7f\x80\xbf\xc3\xff")
	for range 2000 {
		b := make([]byte, r.IntN(150))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		inputs = append(inputs, b)
	}

	for _, b := range inputs {
		for i := 0; i <= len(b); i++ {
			for _, above := range []uint64{0, msb} {
				want := i
				for want < len(b) && !isSpecial(b[want], above) {
					want++
				}
				if got := findSpecial(b, i, above); got != want {
					t.Fatalf("findSpecial(%q, %d, %#x) = %d, want %d", b, i, above, got, want)
				}
				if got, _ := noWindow.next(b, i, above); got != want {
					t.Fatalf("noWindow.next(%q, %d, %#x) = %d, want %d", b, i, above, got, want)
				}
				if i < len(b) {
					w := loadWindow(b, i, above)
					for k := range 64 {
						if got, want := w.mask>>k&1 != 0, i+k >= len(b) || isSpecial(b[i+k], above); got != want {
							t.Fatalf("loadWindow(%q, %d, %#x) bit %d = %v, want %v", b, i, above, k, got, want)
						}
					}
				}
			}
			want := i
			for want < len(b) && isDigit(b[want]) {
				want++
			}
			if got := skipDigits(b, i); got != want {
				t.Fatalf("skipDigits(%q, %d) = %d, want %d", b, i, got, want)
			}
			want = i
			for want < len(b) && !isDelim(b[want]) {
				want++
			}
			if got := skipScalar(b, i); got != want {
				t.Fatalf("skipScalar(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	}
}
