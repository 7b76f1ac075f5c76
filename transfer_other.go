//go:build !linux && !darwin && !windows

package custody

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

var errNoTransfer = fmt.Errorf("ownership transfer on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func listenGrant() (grantListener, string, error) { return nil, "", errNoTransfer }

func dialGrant(grantToken) (grantConn, error) { return nil, errNoTransfer }

func checkPeer(grantConn) (int, error) { return 0, errNoTransfer }

func dropOffer(offer) {}

func (c *Child) shareJob(int) (uint64, error) { return 0, errNoTransfer }

func adoptScope(offer, procid.ID) (*scope.Scope, error) { return nil, errNoTransfer }

func (o *Owner) coverAdopted(*scope.Scope, string) error { return errNoTransfer }

func (c *Child) exitStatus() error { return errNoTransfer }
