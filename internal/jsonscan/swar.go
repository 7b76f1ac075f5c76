package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// SWAR ("SIMD within a register") tests eight bytes at a time in a uint64. The usual test for a
// zero byte, (v-lsb) &^ v & msb, is exact only for the lowest byte it marks: a borrow out of a
// zero byte can mark the byte above it too. The scanners that take just the lowest mark use such
// tests; special, whose every mark a window keeps, keeps bytes apart instead: it clears bit 7
// before adding, and no sum then reaches past bit 7.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special marks exactly the bytes of x that end a run of plain string bytes, '"', '\\' and
// control characters, and also each byte with a bit of above set (above is 0 or msb).
//
// In y, bit 7 is clear. Flipping bit 1 maps '"' (0x22) to 0x20 and keeps control characters
// below 0x20, and adding 0x5f sets bit 7 exactly for the bytes that are then 0x21 or more; '\\'
// is the byte that is zero after the second flip, which adding 0x7f leaves without bit 7. A
// byte with bit 7 set in x is neither.
func special(x, above uint64) uint64 {
	y := x &^ msb
	plain := ((y^(lsb*0x02))+lsb*0x5f)&((y^(lsb*'\\'))+lsb*0x7f) | x
	return (^plain | x&above) & msb
}

// findSpecial returns the index of the first byte at or after data[i] that special marks, or
// len(data).
func findSpecial(data []byte, i int, above uint64) int {
	for ; i+8 <= len(data); i += 8 {
		if t := special(binary.LittleEndian.Uint64(data[i:]), above); t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	for ; i < len(data); i++ {
		if c := data[i]; c == '"' || c == '\\' || c < 0x20 || c&byte(above) != 0 {
			return i
		}
	}
	return i
}

// skipDigits returns the index of the first byte at or after data[i] that is not a decimal
// digit, or len(data).
func skipDigits(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		// Not a digit: subtracting '0' borrows, or adding 0x46 reaches 0x80. Only the lowest
		// mark is exact.
		x := binary.LittleEndian.Uint64(data[i:])
		if t := ((x - lsb*'0') | (x + lsb*0x46)) & msb; t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

// skipScalar returns the index of the first ',', ']', '}' or whitespace byte at or after
// data[i], or len(data): the end of a number or literal that starts at data[i] in valid JSON.
func skipScalar(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		// Only the lowest mark is exact.
		x := binary.LittleEndian.Uint64(data[i:])
		c := x ^ (lsb * ',')
		b := (x | lsb*0x20) ^ (lsb * '}') // ']' | 0x20 is '}'
		if t := ((c-lsb)&^c | (b-lsb)&^b | (x-lsb*0x21)&^x) & msb; t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	for ; i < len(data); i++ {
		if c := data[i]; c == ',' || c == ']' || c == '}' || c <= ' ' {
			return i
		}
	}
	return i
}

// A window records which of the 64 bytes from data[base] special marks, one bit each, so that
// finding the end of a string inside it costs a shift and a count of trailing zeros.
//
// This is what makes the scanners fast. Each token's position depends on where the previous
// one ended, so a scanner that loads and tests eight bytes at every token waits on that load
// and test, some fifteen cycles, once per token. A window's loads are at addresses known in
// advance and its tests are independent, so the processor overlaps them; the chain from token
// to token shrinks to a few cycles.
type window struct {
	base int
	mask uint64 // bit k: data[base+k] is marked, or lies past the end of data
}

// noWindow covers no index.
var noWindow = window{base: -64}

// loadWindow returns the window at data[base] for special(…, above).
func loadWindow(data []byte, base int, above uint64) window {
	if len(data)-base >= 64 {
		d := data[base : base+64]
		return window{base, gather(special(binary.LittleEndian.Uint64(d[0:]), above)) |
			gather(special(binary.LittleEndian.Uint64(d[8:]), above))<<8 |
			gather(special(binary.LittleEndian.Uint64(d[16:]), above))<<16 |
			gather(special(binary.LittleEndian.Uint64(d[24:]), above))<<24 |
			gather(special(binary.LittleEndian.Uint64(d[32:]), above))<<32 |
			gather(special(binary.LittleEndian.Uint64(d[40:]), above))<<40 |
			gather(special(binary.LittleEndian.Uint64(d[48:]), above))<<48 |
			gather(special(binary.LittleEndian.Uint64(d[56:]), above))<<56}
	}
	m := ^uint64(0) << (len(data) - base)
	for k, c := range data[base:] {
		if c == '"' || c == '\\' || c < 0x20 || c&byte(above) != 0 {
			m |= 1 << k
		}
	}
	return window{base, m}
}

// gather moves the high bit of each byte of m, whose other bits are clear, to bits 0-7 (the
// SWAR form of SSE's movemask). The multiplier puts byte k's bit at bit 56+k; the other partial
// products land elsewhere and never on each other, so nothing carries into the top byte.
func gather(m uint64) uint64 {
	return (m * 0x0002040810204081) >> 56
}

// find is the inlined fast path of next: the index of the first marked byte at or after data[i],
// and true, when w holds it.
func (w window) find(i int) (int, bool) {
	if d := uint(i - w.base); d < 64 {
		if m := w.mask >> d; m != 0 {
			return i + bits.TrailingZeros64(m), true
		}
	}
	return 0, false
}

// next returns the index of the first byte at or after data[i] that special(…, above) marks, or
// len(data), and the window that holds it, loading windows as needed.
func (w window) next(data []byte, i int, above uint64) (int, window) {
	if j, ok := w.find(i); ok {
		return j, w
	}
	if d := uint(i - w.base); d < 64 {
		i = w.base + 64 // nothing is marked from i to the end of w
	}
	for ; i < len(data); i += 64 {
		if w = loadWindow(data, i, above); w.mask != 0 {
			return i + bits.TrailingZeros64(w.mask), w
		}
	}
	return len(data), w
}
