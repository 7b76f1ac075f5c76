//go:build linux || darwin || windows

package procid

// osSupported is true: an incarnation can be read here (see Supported).
const osSupported = true
