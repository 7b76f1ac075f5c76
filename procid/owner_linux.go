package procid

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/custody-dev/custody/internal/procfs"
)

// _PF_KTHREAD is the per-process flag of kernel threads (include/linux/sched.h), field 9 of
// /proc/PID/stat.
const _PF_KTHREAD = 0x00200000

func owner(pid int) (UIDs, error) {
	var big [4096]byte // status runs to 1.5 KB
	n, err := procfs.ReadSmall(procRoot+"/"+strconv.Itoa(pid)+"/status", big[:])
	if err != nil {
		return UIDs{}, classify(pid, err)
	}
	for line := range bytes.Lines(big[:n]) {
		// "Uid:\t1000\t1000\t1000\t1000": real, effective, saved, filesystem.
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 3 {
			break
		}
		var ids [3]int
		for i := range ids {
			if ids[i], err = strconv.Atoi(string(f[i])); err != nil {
				return UIDs{}, fmt.Errorf("procid: owner of pid %d: %w", pid, err)
			}
		}
		return UIDs{Real: ids[0], Effective: ids[1], Saved: ids[2]}, nil
	}
	return UIDs{}, fmt.Errorf("procid: owner of pid %d: no Uid line in status", pid)
}

func kernelThread(pid int) bool {
	buf := statBufs.Get().(*[1024]byte)
	defer statBufs.Put(buf)
	n, err := procfs.ReadSmall(procRoot+"/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return false
	}
	// Fields after the command name (which may hold spaces and parentheses: parse from the last
	// ')'): state ppid pgrp session tty_nr tpgid flags ...
	line := buf[:n]
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(line[i+1:])
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&_PF_KTHREAD != 0
}
