//go:build unix

package authority

import "syscall"

func (p *Process) ask() (string, error) { return AskSIGTERM, p.signal(syscall.SIGTERM) }
