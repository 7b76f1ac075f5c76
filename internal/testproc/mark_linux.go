package testproc

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
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
	want := append([]byte(mark), 0)
	var found []int
	for _, e := range d {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue // gone, or a kernel thread, or not ours to read
		}
		found = append(found, pid)
	}
	return found, nil
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
