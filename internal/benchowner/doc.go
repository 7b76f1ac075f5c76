// Package benchowner is the owner that the owner-death benchmarks SIGKILL: it owns a number of
// scopes, each a small process tree, and waits to be killed. It is a package of its own, using
// only the API that custody has had from its first release, so that scripts/bench-against can
// build the same owner from an earlier revision and the benchmark can time that revision's death
// beside this one's.
package benchowner
