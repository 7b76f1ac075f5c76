package procid

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Cmdline returns the process's argument vector from /proc/PID/cmdline. It is observation: any
// process may rewrite its own.
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/cmdline")
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("procid: cmdline of pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("procid: cmdline of pid %d: %w", pid, err)
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, nil // a kernel thread or a zombie
	}
	var argv []string
	for a := range bytes.SplitSeq(b, []byte{0}) {
		argv = append(argv, string(a))
	}
	return argv, nil
}
