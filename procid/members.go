package procid

import "errors"

var (
	// ErrScanBlind reports that /proc hides other users' processes from this one (hidepid), so a
	// scan cannot prove that a group has no live member.
	ErrScanBlind = errors.New("procid: /proc hides other users' processes (hidepid)")
	// ErrScanUnreadable stops a scan that met a process it could not read: its group is unknown.
	ErrScanUnreadable = errors.New("procid: a process could not be read during the scan")
)
