// Package procfs reads Linux /proc files through plain system calls: open, read, close on the raw
// descriptor (it has nothing for other systems). os.ReadFile and os.Open register each descriptor
// with the runtime's poller first (and are refused, /proc files being regular files), which
// doubles the system calls of a read; custody's hot paths read one /proc file per ledger row, per
// process of a sweep, per thread and child of a reaper's pass.
package procfs
