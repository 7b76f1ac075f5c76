//go:build !linux

package scope

import "os"

func signalAll(ss []*Scope, sig os.Signal) []error {
	errs := make([]error, len(ss))
	for i, s := range ss {
		errs[i] = s.Signal(sig)
	}
	return errs
}
