//go:build !unix

package localsock

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

func listen(path string) (*net.UnixListener, error) {
	return nil, fmt.Errorf("localsock: listen %s on %s: %w", path, runtime.GOOS, errors.ErrUnsupported)
}
