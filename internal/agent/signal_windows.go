package agent

import "syscall"

// signalByName returns the signal named name, or 0. Windows has none of these, and a scope there
// takes SIGKILL alone (its job terminated); the other names are still known, so that a request
// for one is answered unsupported rather than as a name that means nothing.
func signalByName(name string) syscall.Signal { return signalNames[name] }

var signalNames = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT, "SIGILL": syscall.SIGILL,
	"SIGTRAP": syscall.SIGTRAP, "SIGABRT": syscall.SIGABRT, "SIGBUS": syscall.SIGBUS, "SIGFPE": syscall.SIGFPE,
	"SIGKILL": syscall.SIGKILL, "SIGSEGV": syscall.SIGSEGV, "SIGPIPE": syscall.SIGPIPE, "SIGALRM": syscall.SIGALRM,
	"SIGTERM": syscall.SIGTERM,
}
