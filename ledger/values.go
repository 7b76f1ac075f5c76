package ledger

import (
	"bytes"

	"github.com/custody-dev/custody/internal/jsonscan"
)

// values holds what the pointer fields of one parse's rows point to: the numbers in blocks, so
// that decoding a row allocates a few times per thousand rows rather than once per field (eleven
// times for a row custody writes), and the boot id, which every row of a boot repeats, once. A
// nil *values allocates each value on its own.
//
// The rows share what it holds: nothing writes through a row's pointers (Set replaces them).
type values struct {
	floats  []float64
	ints    []int
	uints   []uint64
	bootRaw []byte // the last boot_id decoded, as written, and its value
	boot    *string
}

// valuesBlock is how many values of one type a block holds.
const valuesBlock = 512

func (s *values) float(f float64) *float64 {
	if s == nil {
		return ptr(f) // not &f: f would be moved to the heap on every call
	}
	return keep(&s.floats, f)
}

func (s *values) int(i int) *int {
	if s == nil {
		return ptr(i) // not &i: i would be moved to the heap on every call
	}
	return keep(&s.ints, i)
}

func (s *values) uint(u uint64) *uint64 {
	if s == nil {
		return ptr(u) // not &u: u would be moved to the heap on every call
	}
	return keep(&s.uints, u)
}

// keep stores v in the block, starting a new block when it is full: the values stored before
// stay where they are.
func keep[T any](block *[]T, v T) *T {
	if len(*block) == cap(*block) {
		*block = make([]T, 0, valuesBlock)
	}
	*block = append(*block, v)
	return &(*block)[len(*block)-1]
}

// bootID decodes a boot_id, the JSON string v, reusing the last one decoded when v is written
// the same way; nil when v is not a string.
func (s *values) bootID(v []byte) *string {
	if s != nil && s.boot != nil && bytes.Equal(v, s.bootRaw) {
		return s.boot
	}
	b, ok := jsonscan.String(v)
	if !ok {
		return nil
	}
	if s != nil {
		s.bootRaw, s.boot = v, &b
	}
	return &b
}
