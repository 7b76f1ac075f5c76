package authority

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Windows has no process groups custody could signal; its scope is a job object.

func (g Group) unsupported() error {
	return fmt.Errorf("authority: process group %d on windows: %w", g.PGID, errors.ErrUnsupported)
}

func (g Group) verdict() (groupVerdict, error) { return groupUnknown, g.unsupported() }

func (g Group) signal(os.Signal) error { return g.unsupported() }

func (g Group) empty() (bool, error) { return false, g.unsupported() }

func (g Group) wait(context.Context) error { return g.unsupported() }
