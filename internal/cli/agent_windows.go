package cli

import (
	"errors"
	"fmt"

	"github.com/custody-dev/custody/internal/agent"
)

// serveAgent serves the first client of the named pipe: the process at its client end, watched
// through the handle opened and proven at its connect. --fd is not served here (see
// agent.FromFD).
func serveAgent(o *agentOptions, cfg agent.Config) error {
	if o.fd >= 0 {
		_, err := agent.FromFD(o.fd)
		return err
	}
	if o.within > 0 {
		return fmt.Errorf("agent: --accept-within: %w on Windows", errors.ErrUnsupported)
	}
	pipe, err := agent.Listen(o.socket)
	if err != nil {
		return err
	}
	defer pipe.Close()
	fmt.Fprintf(o.stdout, "ready %s\n", o.socket)
	p, err := pipe.Accept()
	if err != nil {
		return err
	}
	cfg.OwnerDone = p.Done()
	id := p.ID()
	cfg.Caller = &id
	return agent.Serve(p, cfg)
}
