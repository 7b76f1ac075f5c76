package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// TestStringStop compares the word-at-a-time stringStop with the byte table it stands for, at
// every offset of strings mixing each class with plain bytes, so that every position of a stop
// within a word and the byte-wise tail are covered.
func TestStringStop(t *testing.T) {
	interesting := []byte{0, 1, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 0x7f, 0x80, 0x81, 0xc3, 0xff, 'a'}
	rng := rand.New(rand.NewPCG(1, 2))
	slow := func(data []byte, i int, mask uint8) int {
		for i < len(data) && stops[data[i]]&mask == 0 {
			i++
		}
		return i
	}
	for range 20000 {
		data := make([]byte, rng.IntN(40))
		for k := range data {
			if rng.IntN(6) == 0 {
				data[k] = interesting[rng.IntN(len(interesting))]
			} else {
				data[k] = 'a' + byte(rng.IntN(26))
			}
		}
		for i := range len(data) + 1 {
			for _, mask := range []uint8{stopString, stopString | stopNonASCII} {
				if got, want := stringStop(data, i, mask), slow(data, i, mask); got != want {
					t.Fatalf("stringStop(%q, %d, %d) = %d, want %d", data, i, mask, got, want)
				}
			}
		}
	}
	for c := range 256 { // each byte value in each lane
		for lane := range 8 {
			data := []byte("abcdefghij")
			data[lane] = byte(c)
			for _, mask := range []uint8{stopString, stopString | stopNonASCII} {
				if got, want := stringStop(data, 0, mask), slow(data, 0, mask); got != want {
					t.Fatalf("byte %#x in lane %d, mask %d: %d, want %d", c, lane, mask, got, want)
				}
			}
		}
	}
}
