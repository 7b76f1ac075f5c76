package agent

// fdsWithLastByte: on Linux a read that returns descriptors ends within the data of the sendmsg
// that carried them (see splitter).
const fdsWithLastByte = true
