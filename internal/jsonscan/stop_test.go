package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// TestStringStopMatchesTheByteLoop holds the eight-bytes-at-a-time scan to the table's byte
// loop on every start of inputs made of the bytes where a word trick could go wrong: each
// class's edges (0x1f and 0x20, '"' and its neighbours, '\\', 0x7f and 0x80, 0xff) and the
// bytes whose borrows could flag a neighbour.
func TestStringStopMatchesTheByteLoop(t *testing.T) {
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 'a', 0x7f, 0x80, 0x81, 0xa2, 0xdc, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	reference := func(data []byte, i int, mask uint8) int {
		for i < len(data) && stops[data[i]]&mask == 0 {
			i++
		}
		return i
	}
	data := make([]byte, 40)
	for round := range 20000 {
		for k := range data {
			if rng.IntN(4) == 0 {
				data[k] = edges[rng.IntN(len(edges))]
			} else {
				data[k] = byte(0x23 + rng.IntN(0x5c-0x23)) // plain ASCII below '\\'
			}
		}
		n := rng.IntN(len(data) + 1)
		for _, mask := range []uint8{stopString, stopNonASCII, stopString | stopNonASCII} {
			for i := 0; i <= n; i++ {
				if got, want := stringStop(data[:n], i, mask), reference(data[:n], i, mask); got != want {
					t.Fatalf("round %d: stringStop(%x, %d, %d) = %d, want %d", round, data[:n], i, mask, got, want)
				}
			}
		}
	}
}
