//go:build !linux && !darwin

package sockdir

// Lock is a socket directory's lock: nothing here makes one.
type Lock struct{}

// Release does nothing: there is no lock.
func (*Lock) Release() {}
