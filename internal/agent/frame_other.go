//go:build !linux

package agent

// fdsWithLastByte: on the BSDs (macOS) a read that returns descriptors begins with the data of
// the sendmsg that carried them (see splitter).
const fdsWithLastByte = false
