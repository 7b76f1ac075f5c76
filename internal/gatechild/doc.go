// Package gatechild is a gated child's side of custody's gate (the process-group path's, see
// the custody package): a child started as a copy of its owner's binary, which waits until the
// owner has covered its process group and then execs the program it was started for.
//
// The wait runs in this package's init, not in custody.Init at the top of main: a package is
// initialised once the packages it imports are, and this one imports only the standard
// library's lowest layers, so the binary's other packages (the program's own, its libraries',
// most of the standard library's) never run their initialisation in a gate. The gate no longer
// pays for them before its wait, nor for them again in the program it execs (a whole binary's
// initialisation is a millisecond or more), and an init with effects (a file made, a connection
// opened, a line logged) does not happen once more in every gated child. What runs before it:
// the runtime's start, and the packages that sort before this one's path and whose imports are
// ready (Go initialises, at each step, the first such package by import path).
package gatechild
