package cli

import "github.com/custody-dev/custody"

// followStops has nothing to follow on Windows: a console has no job control.
func (t *terminal) followStops(*custody.Child) {}
