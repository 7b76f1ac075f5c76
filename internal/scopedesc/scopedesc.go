// Package scopedesc is a scope's description in plain values, with its JSON: what a ledger row
// records of a child's scope, what a giver offers a receiver in an ownership transfer, and what
// package scope rebuilds a scope from (scope.Open). It stands apart from package scope so that
// the ledger, which records descriptions, does not import the package that acts on them; scope
// re-exports its names as scope.Desc and scope.Kind.
package scopedesc

import "github.com/custody-dev/custody/procid"

// Kind names the mechanism of a scope; ledger rows record it in their "scope" field.
type Kind string

const (
	KindGroup  Kind = "pgrp"   // a Unix process group led by the child
	KindCgroup Kind = "cgroup" // a Linux cgroup v2 custody made for the child
	KindJob    Kind = "job"    // a Windows job object custody created
)

// Containment is the word a ledger row's "containment" field and custody doctor use for a kind:
// "cgroup", "process-group" or "job".
func (k Kind) Containment() string {
	if k == KindGroup {
		return "process-group"
	}
	return string(k)
}

// Desc describes a scope in plain values. Its JSON is the members a ledger row and a transfer's
// offer write of it ("scope", "pgid", "cgroup", "cgroup_id"); the leader is the row's or the
// offer's own process, whose fields each names its own way, and is not encoded here.
type Desc struct {
	Kind   Kind      `json:"scope"`
	Leader procid.ID `json:"-"`              // the child the scope was made for; Start 0 when not known
	PGID   int       `json:"pgid,omitempty"` // the process group (the leader's PID): the scope, or in a cgroup the job a terminal controls
	// Cgroup is, for KindCgroup, the cgroup's path in the cgroup v2 hierarchy, as
	// /proc/PID/cgroup shows it ("/custody/custody-4026531836-41-96/s1"), independent of where
	// cgroup2 is mounted; CgroupID is its inode number (the kernel's cgroup id), which proves that
	// a cgroup found at that path later is the same one.
	Cgroup   string `json:"cgroup,omitempty"`
	CgroupID uint64 `json:"cgroup_id,omitempty"`
	// ScopeID is the scope's id in its processes' environment (CUSTODY_SCOPE), or "": on the
	// process-group path the processes of the owner's user that carry it are stopped with the
	// scope, even those that left the group. A row records it in a field of its own
	// ("scope_id"), so it is not encoded here.
	ScopeID string `json:"-"`
}
