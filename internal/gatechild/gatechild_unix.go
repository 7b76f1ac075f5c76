//go:build unix

package gatechild

import (
	"os"
	"strconv"
	"syscall"
)

// Environment of a gated child: the descriptor of the gate's pipe, the pipe's identity (its
// device and inode, "<dev>:<ino>", see PipeID), and the program to exec. The identity is the
// proof that the process was started as a gate: the variables alone could come from anywhere
// (inherited by accident, or set by whoever runs the binary), and a process that obeyed them
// would exec a program it was never asked to run, or exit before its main ran.
const (
	EnvFD   = "CUSTODY_GATE_FD"
	EnvPipe = "CUSTODY_GATE_PIPE"
	EnvPath = "CUSTODY_GATE_PATH"
)

// Exit is the gate's exit status when its owner died before covering it: the program never ran.
const Exit = 125

// PipeID names a pipe by its device and inode: unique among the pipes that exist at once.
func PipeID(dev, ino uint64) string {
	return strconv.FormatUint(dev, 10) + ":" + strconv.FormatUint(ino, 10)
}

func init() { run() }

// run waits for the owner's byte and execs the program, or exits when the owner died first. It
// returns when this process is no gate, and then only after removing the gate's variables from
// its environment, so that nothing it starts inherits them.
func run() {
	v, pipe, path := os.Getenv(EnvFD), os.Getenv(EnvPipe), os.Getenv(EnvPath)
	if v == "" && pipe == "" && path == "" {
		return
	}
	for _, k := range []string{EnvFD, EnvPipe, EnvPath} {
		os.Unsetenv(k)
	}
	fd, ok := gateFD(v, pipe)
	if !ok || path == "" {
		return // not started as a gate: the variables came from elsewhere
	}
	var b [1]byte
	n, err := syscall.Read(fd, b[:])
	for err == syscall.EINTR {
		n, err = syscall.Read(fd, b[:])
	}
	syscall.Close(fd)
	if n != 1 {
		os.Exit(Exit) // the owner died before covering this child
	}
	err = syscall.Exec(path, os.Args, os.Environ())
	os.Stderr.WriteString("custody: gate: exec " + path + ": " + err.Error() + "\n")
	if err == syscall.ENOENT {
		os.Exit(127)
	}
	os.Exit(126)
}

// gateFD returns the gate's descriptor when v names one that is the pipe pipe identifies, open
// for reading only: the pipe an owner made for this process. A descriptor the process does not
// have, a file, a terminal or another pipe is no gate.
func gateFD(v, pipe string) (int, bool) {
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return 0, false
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO || PipeID(uint64(st.Dev), uint64(st.Ino)) != pipe {
		return 0, false
	}
	fl, err := accessMode(fd)
	if err != nil || fl != syscall.O_RDONLY {
		return 0, false
	}
	return fd, true
}
