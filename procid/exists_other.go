//go:build !unix && !windows

package procid

// exists cannot ask the OS here (plan9, js, wasip1). True proves nothing, which is the only
// honest answer: false would prove a death that was never observed.
func exists(pid int) bool { return true }
