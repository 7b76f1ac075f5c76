// Package custody starts owned child processes: each is positively identified, dies with its
// owner however the owner dies, is stopped only through authority retained from its spawn, and is
// recorded in the shared ledger so that a crashed session's leftovers can be reaped with proof.
//
// A program calls [Init] first thing in main, then starts children through an [Owner]:
//
//	func main() {
//		custody.Init() // turns this binary into its own owner-death supervisor when re-executed as one
//		owner := &custody.Owner{}
//		defer owner.Close() // stops and releases every child still held, ends the supervisor
//		child, err := owner.Start(ctx, exec.Command("my-backend"), custody.StartOptions{Purpose: "serve"})
//		…
//		res := child.Stop(ctx, custody.StopOptions{}) // TERM its scope, grace, KILL; a typed outcome
//	}
//
// How a child dies with its owner, by OS:
//
//	OS       scope (taken at spawn, no window)          owner death reaches it through
//	Linux    a cgroup v2 of its own, made before the    the supervisor: a separate process whose
//	         child and entered at birth (clone3         stdin pipe the owner holds, covering the
//	         CLONE_INTO_CGROUP), where a writable       cgroup before the child exists; on EOF it
//	         cgroup2 subtree exists                     kills it (cgroup.kill) and removes it
//	Linux    a new process group led by the child       the same supervisor, covering the group
//	else,    (Setpgid)                                  right after the start; on EOF it stops
//	macOS                                               every covered group (package supervise)
//	Windows  a job object with KILL_ON_JOB_CLOSE,       the kernel: the owner's job handle closes
//	         the child assigned while suspended         when the owner dies, killing the job
//
// Nothing leaves a job, nor a cgroup by setsid(2), setpgid(2) or forking: only by a write of its
// PID into a cgroup.procs outside, which needs write access there and at the common ancestor
// (any process of root has it; in a delegated subtree any process of its user; and the service
// manager moves a process on request, as systemd-run --scope asks). custody does not prevent such
// a move, and a child so moved outlives its owner; its row stays for reap, which stops it. A
// process group does not contain a descendant that calls setsid(2) or setpgid(2) to leave it; [scope.Containment] says which this process gets. An owner
// that runs inside a custody cgroup (a nested owner) makes its children's cgroups inside its own.
package custody

import "github.com/custody-dev/custody/supervise"

// Init makes a program that imports custody its own owner-death supervisor, and lets it gate its
// children: when the running binary was re-executed as a supervisor by an [Owner], Init serves
// and exits; otherwise it returns at once. Call it first thing in main, before anything else
// runs. An owner that called it gates its children on the process-group path (see
// [Owner.Start]): each starts as a copy of this binary that waits, during the initialisation of
// custody's packages and before this main or most of the others' initialisation runs, until the
// owner has covered it, and then execs the child's program.
func Init() {
	supervise.Init()
	initCalled.Store(true)
}
