package procid

import (
	"errors"
	"fmt"
	"runtime"
)

// Supported returns nil where custody can read a process's incarnation: Linux, macOS and
// Windows. Elsewhere (FreeBSD and the other BSDs, illumos, …) custody compiles, but every read of
// a process returns an error wrapping errors.ErrUnsupported: no child can be proven, so none can
// be started as owned, stopped or reaped. There Supported returns an error that names the OS and
// says so in a person's words, wrapping errors.ErrUnsupported, for callers to report before
// anything else fails in terms of a single read.
//
// The answer is the OS's, known when custody is built, as the reads' own failure is: asking costs
// no read (a first read of this process's incarnation is 0.15 ms, which custody run would pay
// before anything else).
func Supported() error {
	if !osSupported {
		return unsupportedOS(runtime.GOOS)
	}
	return nil
}

func unsupportedOS(goos string) error {
	return fmt.Errorf("%s is not supported: no process's identity can be read there, so nothing can be started, "+
		"stopped or reaped with proof (Linux, macOS and Windows are supported): %w", goos, errors.ErrUnsupported)
}
