package supervise

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Environment variables of the supervisor process. [Client] sets them; [Init] and [Run] read them.
const (
	// EnvSupervisor set to "1" makes [Init] run the supervisor instead of returning.
	EnvSupervisor = "CUSTODY_SUPERVISOR"
	// EnvOwnerPGID is [Config.OwnerPGID] for [Init], in decimal.
	EnvOwnerPGID = "CUSTODY_SUPERVISOR_OWNER_PGID"
	// EnvGrace is [Config.Grace] for [Init], as a Go duration ("3s", "500ms").
	EnvGrace = "CUSTODY_SUPERVISOR_GRACE"
	// EnvReadyFD names an inherited descriptor on which [Run] writes one byte once it is ready
	// to read its standard input, and which it then closes. The readiness signal costs the
	// protocol nothing and writes nothing to a terminal when no one asked for it.
	EnvReadyFD = "CUSTODY_SUPERVISOR_READY_FD"
	// EnvDeath, set by [Client] on Linux, is "<fd>,<offset>": an inherited memfd page shared with
	// the owner, and the offset of the word in it that the kernel marks when the owner begins to
	// die, before its pipe's end can be read (see the package doc).
	EnvDeath = "CUSTODY_SUPERVISOR_DEATH"
	// EnvBatch is "1" when the owner started the supervisor SCHED_BATCH (Linux): its thread that
	// waits for the owner's death word then goes back to SCHED_NORMAL.
	EnvBatch = "CUSTODY_SUPERVISOR_BATCH"
	// EnvOwnerCgroup is [Config.OwnerCgroup] for [Init].
	EnvOwnerCgroup = "CUSTODY_SUPERVISOR_OWNER_CGROUP"
	// EnvLog sets the level of the supervisor's log on standard error: debug, info, warn (the
	// default) or error.
	EnvLog = "CUSTODY_SUPERVISOR_LOG"
)

// Init runs the supervisor and exits when the process was started as one (when $EnvSupervisor
// is "1", as [Client] starts it by default); otherwise it returns at once. Call it first thing
// in main, before anything else runs, the way moby's reexec.Init is used:
//
//	func main() {
//		supervise.Init()
//		...
//	}
//
// A program that uses [Client] without a [Client.Command] must call it: [Client] re-executes
// the program's own binary as its supervisor.
func Init() {
	if os.Getenv(EnvSupervisor) != "1" {
		initCalled.Store(true)
		return
	}
	os.Exit(initMain())
}

// initCalled records that Init ran in this process and returned. A [Client] that re-executes
// this binary requires it: without Init the copy would run main again, with whatever main does
// before its first start (open files, print, start servers), and only then fail.
var initCalled atomic.Bool

func initMain() int {
	cfg, err := configFromEnv()
	if err == nil {
		err = Run(cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "custody supervise: error: %v\n", err)
		return 1
	}
	return 0
}

// Run is the supervisor process's body, for [Init] and for a command such as `custody
// supervise`: it ignores SIGINT and SIGHUP (a terminal's ^C or hangup reaches every process of
// the session, but must not end the supervisor before its owner) and SIGPIPE (a log line written
// to a dead stderr pipe must not kill it mid-sweep), trims the Go runtime for a small footprint,
// signals readiness on $EnvReadyFD when set, and serves os.Stdin until EOF. A nil cfg.Logger
// logs to standard error at the level $EnvLog names (warn by default).
func Run(cfg Config) error { return run(cfg) }

func configFromEnv() (Config, error) {
	var cfg Config
	if v := os.Getenv(EnvOwnerPGID); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return cfg, fmt.Errorf("parse %s: %w", EnvOwnerPGID, err)
		}
		cfg.OwnerPGID = n
	}
	if v := os.Getenv(EnvGrace); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, fmt.Errorf("parse %s: %w", EnvGrace, err)
		}
		cfg.Grace = d
	}
	cfg.OwnerCgroup = os.Getenv(EnvOwnerCgroup)
	return cfg, nil
}

// stderrLogger is the supervisor process's default logger.
func stderrLogger() *slog.Logger {
	level := slog.LevelWarn
	switch strings.ToLower(os.Getenv(EnvLog)) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error":
		level = slog.LevelError
	}
	return slog.New(newLineHandler(os.Stderr, level)).With("supervisor", os.Getpid())
}
