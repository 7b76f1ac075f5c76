package testproc

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// markEnv is the variable [Mark] sets: its value is unique to one call.
const markEnv = "CUSTODY_TEST_MARK"

// Mark returns an environment assignment unique to this call, for the processes a test starts
// and cannot name by PID (a child that a failed start killed before the test learnt its PID, the
// descendants it started): every process started with it, and every descendant that inherited it,
// carries it in /proc/PID/environ, which [NoSurvivors] reads. Reading another user's environ
// needs root or its owner.
func Mark() string { return markEnv + "=" + rand.Text() }

// Marked returns the PIDs of the live processes whose initial environment holds mark. A zombie's
// environment reads empty: it is not listed.
func Marked(mark string) ([]int, error) {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var found []int
	for _, e := range d {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !carries(env, mark) {
			continue // gone, or a kernel thread, or not ours to read
		}
		found = append(found, pid)
	}
	return found, nil
}

// KillMarked SIGKILLs every live process that carries mark, and returns their PIDs: the cleanup
// of a test whose processes may have outlived it. Each is signalled through a pidfd opened before
// its environment is read, so a PID recycled meanwhile names a process whose environment does
// not hold the mark, and is left alone.
func KillMarked(mark string) []int {
	pids, _ := Marked(mark)
	var killed []int
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && carries(env, mark) && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			killed = append(killed, pid)
		}
		unix.Close(fd)
	}
	return killed
}

// CleanupMarked kills the processes carrying mark at the test's end (see [KillMarked]), and
// fails the test if there were any.
func CleanupMarked(t testing.TB, mark string) {
	t.Cleanup(func() {
		if pids := KillMarked(mark); len(pids) > 0 {
			t.Errorf("processes of the test were left running, killed at its end: %v", pids)
		}
	})
}

// NoSurvivors fails t unless every process carrying mark has exited within timeout. SIGKILLed
// processes take a moment to go; a survivor that stays is a leak.
func NoSurvivors(t testing.TB, mark string, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, func() error {
		pids, err := Marked(mark)
		if err != nil {
			return err
		}
		if len(pids) > 0 {
			return fmt.Errorf("processes of the test still run: %v", pids)
		}
		return nil
	})
}

// carries reports whether env, a /proc/PID/environ, holds the assignment mark.
func carries(env []byte, mark string) bool {
	return bytes.Contains(append([]byte{0}, env...), []byte("\x00"+mark+"\x00"))
}
