package procid

func owner(pid int) (UIDs, error) {
	kp, err := kinfo(pid)
	if err != nil {
		return UIDs{}, err
	}
	return UIDs{Real: int(kp.Eproc.Pcred.P_ruid), Effective: int(kp.Eproc.Ucred.Uid), Saved: int(kp.Eproc.Pcred.P_svuid)}, nil
}

// kernelThread is false: macOS's kernel is kernel_task, PID 0, which no PID check accepts.
func kernelThread(int) bool { return false }
