package eintr_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/custody-dev/custody/internal/eintr"
)

// TestRetry: an interrupted call is made again until it answers; any other error is returned at
// once, with the call's value.
func TestRetry(t *testing.T) {
	calls := 0
	n, err := eintr.Retry(func() (int, error) {
		calls++
		if calls < 3 {
			return -1, syscall.EINTR
		}
		return 7, nil
	})
	if n != 7 || err != nil || calls != 3 {
		t.Errorf("Retry = %d, %v after %d calls; want 7, nil after 3", n, err, calls)
	}
	calls = 0
	err = eintr.Ignoring(func() error {
		calls++
		if calls == 1 {
			return syscall.EINTR
		}
		return syscall.EBADF
	})
	if !errors.Is(err, syscall.EBADF) || calls != 2 {
		t.Errorf("Ignoring = %v after %d calls; want EBADF after 2", err, calls)
	}
}
