// Package supervise kills an owner's process groups and cgroups when the owner dies, however it
// dies.
//
// A supervisor is a small separate process, one per owner, in its own session. Its standard input
// is a pipe whose only write end the owner holds. The owner writes one line per group it wants
// covered. When the owner dies (exit, crash, SIGKILL, OOM kill), the kernel closes the write end.
// The supervisor reads EOF and stops every group it still covers: SIGTERM, up to [Config.Grace]
// to exit, then SIGKILL. The same EOF after a clean release, with nothing covered, kills nothing.
//
// On Linux a supervisor the [Client] starts does not wait for EOF, which comes only once the
// kernel has torn down the dying owner's memory: it waits on a word of a page it shares with the
// owner ($EnvDeath), which the kernel marks FUTEX_OWNER_DIED at the start of the owner's exit
// (the word lies in the robust futex list of an owner's thread that ends only with the process).
// It then reads the lines already in its pipe and sends SIGTERM at once; a line that arrives
// later still counts (a scope it covers gets SIGTERM on arrival), and EOF, or the grace, ends the
// reading.
//
// The wire protocol (ASCII lines of at most [MaxLine] bytes counting the newline):
//
//	register <pgid>                  cover a group (legacy form, as in the Hermes supervisor;
//	                                 refused for a group whose identity form was refused as stale)
//	register <pid> <pgid> <start>    cover it, bound to its leader's start (ticks, or "unknown")
//	unregister <pgid>                stop covering it
//	cgroup <path>                    cover a cgroup scope custody made (Linux; custody's own line)
//	uncgroup <path>                  stop covering it
//	anything else                    ignored
//
// The cgroup lines are custody's: a Hermes supervisor ignores them as it ignores any unknown
// line, and custody's own sweep treats them as follows. <path> is the cgroup's path in the cgroup
// v2 hierarchy, as /proc/PID/cgroup shows it ("/custody/custody-4026531836-41-96/s1"), printable ASCII
// without spaces, and must name a scope custody made (an s<N> directory in an owner's
// custody-<ns>-<pid>-<start> directory). The owner writes the line after making the cgroup and before
// its child exists; the supervisor opens the cgroup at once and holds it open, which is its proof
// that the cgroup it later kills is the one registered. On EOF a covered cgroup gets SIGTERM
// (every member, each through a pidfd proven to be in the cgroup), up to the grace to empty, then
// cgroup.kill, which no member escapes; once empty it is removed, with the owner's directory
// when that is empty too. Without cgroup v2 (macOS) the lines are ignored.
//
// A group is signalled only while its identity holds: its leader (pid == pgid) is still the
// recorded incarnation, or, with the leader gone, the group still has members. The kernel does
// not hand out a PID that is still some process group's id (Linux: a struct pid lives while any
// task uses it as pid, pgid or sid; XNU's forkproc skips PIDs in use as a pgid or session id), so
// a leaderless group with members is the group that was registered. A group whose leader PID now
// names another process is never signalled. Each covered group is a process-group scope of
// package scope, bound at registration (scope.BindGroup), the same type custody stop, reap, an
// owner and custody run's job control signal groups through: the rule and the proof are scope's.
//
// The Hermes supervisor's v2 form adds a Unix socket on which a child registers its own group with
// a token the owner reserved, its peer credentials and start proving who it is: see [RunSocket]
// and [ServeSocket].
//
// Nested owners on the process-group path: a supervisor [Run] with $CUSTODY_SUPERVISOR_NEST_SOCKET
// ([EnvNestSocket]) set also listens there, and takes a nested owner's own groups, proven to be
// started by a process in a group it covers; see [Outer] and [EnvOuter].
//
// The server is [Serve]; [Run] wraps it as a process body, and [Init] runs it when a program
// re-executes itself as its own supervisor. The owner's side is [Client]: it starts the
// supervisor at the first [Client.Register], keeps the covered set, restarts the supervisor and
// replays the set if the supervisor dies, and releases an idle supervisor.
//
// Readiness: a starter that wants to know when the supervisor reads its pipe passes a pipe's
// write end as an inherited descriptor and names it in $CUSTODY_SUPERVISOR_READY_FD ([EnvReadyFD]);
// [Run] writes one byte to it and closes it; a write that finds the read end closed (the starter
// stopped waiting, or died) is no error, and the pipe is served. The protocol itself needs no
// acknowledgement (lines wait in the pipe), so a starter that does not care, like a shell script,
// passes nothing. [Client] waits for the byte before it returns only where it must (see
// [Client.Start]).
//
// A group is gone when kill(-pgid, 0) fails with ESRCH, or (Linux) when a scan of /proc finds
// none of its members alive: zombies have exited, and an init that does not reap orphans would
// otherwise keep the sweep polling until the grace ends.
//
// Platforms:
//
//	Linux    identity from /proc/PID/stat start ticks (package procid). From 6.9 the supervisor
//	         also holds a pidfd on each leader, proven at registration, and signals the group
//	         through it (PIDFD_SIGNAL_PROCESS_GROUP): the kernel resolves the group from the
//	         leader's own struct pid, so no check is needed at signal time and no window
//	         remains; before 6.9, or without a descriptor to spare, it checks and kills by id
//	macOS    identity from kinfo_proc p_starttime; there is no pidfd, so a tiny window remains
//	         between the identity check and kill(2) in which the leader PID could be recycled
//	Windows  unsupported: custody uses Job Objects with KILL_ON_JOB_CLOSE there; every call
//	         returns an error wrapping [errors.ErrUnsupported], as on the BSDs
//
// The supervisor itself is in the _posix.go files, built for Linux and macOS (linux || darwin);
// the _other.go files are their unsupported complements.
package supervise
