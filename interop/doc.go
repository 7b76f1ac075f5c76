// Package interop holds custody's tests against Hermes's process_identity module, the other
// program that shares custody's ledger, spawn tag and owner-death supervisor. The tests run the
// real module (Python, with psutil) from the directory $CUSTODY_PEER names; without it they skip,
// and under CUSTODY_REQUIRE_PRIVILEGED=1 they fail. The package has no code of its own.
package interop
