package authority_test

import "os"

// cancelSignal kills a helper past its deadline: Windows has no dump signal.
func cancelSignal(p *os.Process) error { return p.Kill() }
