//go:build !linux && !darwin

package localsock

import (
	"errors"
	"fmt"
	"runtime"
)

func peerCredFD(int) (Cred, error) {
	return Cred{}, fmt.Errorf("localsock: peer credentials on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
