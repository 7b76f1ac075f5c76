//go:build !linux

package jsonscan_test

import "testing"

// cpuTimer reports nothing outside Linux, where the clock is CLOCK_THREAD_CPUTIME_ID.
func cpuTimer(*testing.B) func() { return func() {} }
