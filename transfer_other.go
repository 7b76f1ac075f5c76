//go:build !linux && !darwin

package custody

import (
	"errors"
	"fmt"
	"net"
	"runtime"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

var errNoTransfer = fmt.Errorf("ownership transfer on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func listenGrant() (*net.UnixListener, string, error) { return nil, "", errNoTransfer }

func dialGrant(grantToken) (*net.UnixConn, error) { return nil, errNoTransfer }

type cred struct{ pid, uid int }

func peerCred(*net.UnixConn) (cred, error) { return cred{}, errNoTransfer }

func (c *Child) shareJob(int) (uint64, error) { return 0, errNoTransfer }

func adoptScope(offer, procid.ID) (*scope.Scope, error) { return nil, errNoTransfer }

func (o *Owner) coverAdopted(*scope.Scope) error { return errNoTransfer }

func (c *Child) exitStatus() error { return errNoTransfer }
