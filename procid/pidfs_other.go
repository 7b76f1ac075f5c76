//go:build !linux

package procid

// pidfs ids are Linux's (6.9+): elsewhere every record and ID is compared by its start.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

func pidfsErr() error {
	return fmt.Errorf("procid: pidfs ids on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func pidfdIDOf(uintptr) (uint64, error) { return 0, pidfsErr() }

func handleID(*os.Process) (uint64, error) { return 0, pidfsErr() }

func readExact(pid int) (Incarnation, error) { return read(pid) }

func readPidfs(int) (Incarnation, error) { return Incarnation{}, pidfsErr() }

func readPidfsBatch(pids []int, res []Result) {
	for i, pid := range pids {
		res[i] = readHow(pid, howPidfs)
	}
}

func verifyPidfs(ID) error { return pidfsErr() }

func pidfsReads() bool { return false }
