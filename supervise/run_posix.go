//go:build linux || darwin

package supervise

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/custody-dev/custody/internal/eintr"
	"golang.org/x/sys/unix"
)

func run(cfg Config) error {
	signal.Ignore(unix.SIGINT, unix.SIGHUP, unix.SIGPIPE)
	trimRuntime()
	if cfg.Logger == nil {
		cfg.Logger = stderrLogger()
	}
	// The nest socket listens before readiness: the owner names it to its children as soon as
	// the supervisor is ready, and a nested owner's first dial must find it.
	ln := listenNest(os.Getenv(EnvNestSocket), cfg.Logger)
	if ln != nil {
		defer closeNest(ln)
	}
	in := ownerPipe(cfg)
	if err := signalReady(); err != nil {
		return err
	}
	if ln != nil {
		// Off the owner's path: it waits for readiness alone.
		go sweepNestDirsAfter(ln.Addr().String(), cfg.Logger)
		return serveNest(context.Background(), in, ln, cfg.withDefaults())
	}
	return Serve(context.Background(), in, cfg)
}

// trimRuntime keeps the supervisor small. Its heap is a map of covered groups and almost nothing
// else: the protocol path does not allocate per line. The collector is left off, with a soft
// memory limit as the backstop that turns it back on should something (a flood of logged
// refusals, a huge covered set) grow the heap.
func trimRuntime() {
	runtime.GOMAXPROCS(1) // too late to save what startup allocated, but no later thread needs more
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(8 << 20)
}

// signalReady writes one byte to the descriptor $CUSTODY_SUPERVISOR_READY_FD names and closes
// it. It uses the descriptor directly rather than os.NewFile, which would register it with the
// runtime's poller for one write.
func signalReady() error {
	v := os.Getenv(EnvReadyFD)
	if v == "" {
		return nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return fmt.Errorf("ready fd %q: not a descriptor above stderr", v)
	}
	defer unix.Close(fd)
	_, err = eintr.Retry(func() (int, error) { return unix.Write(fd, []byte{'R'}) })
	// EPIPE: nobody holds the read end any more. The starter did not wait (the Client does not
	// on the cgroup path) and has died or given up since: the lines it wrote before are still in
	// the pipe, and serving them is the supervisor's whole purpose, so the wait that is over is no
	// reason to stop. (SIGPIPE is ignored: the write fails instead of killing the supervisor.)
	if err != nil && err != unix.EPIPE {
		return fmt.Errorf("signal ready: %w", os.NewSyscallError("write", err))
	}
	return nil
}
