// Package winproc holds the Windows process calls that more than one custody package makes, each
// with the checks it needs written once: opening a process by PID, reading its creation time,
// and asking it to exit (WM_CLOSE, CTRL_BREAK_EVENT). It is empty elsewhere.
package winproc
