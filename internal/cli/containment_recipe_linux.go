package cli

// containerRecipe says what gives a user's children cgroups on Linux: custody needs a cgroup v2
// subtree it may write (its own cgroup, or a delegated one), with cgroup.kill (5.14) and clone3.
const containerRecipe = "a cgroup comes with one of: running as root; a cgroup v2 subtree delegated to " +
	"you (systemd-run --user --scope -p Delegate=yes custody run ..., or a directory of the cgroup2 mount " +
	"chowned to you by root, with its cgroup.procs, cgroup.threads and cgroup.subtree_control); a systemd " +
	"user manager for you (loginctl enable-linger USER, then log in again so that $XDG_RUNTIME_DIR/bus answers)"
