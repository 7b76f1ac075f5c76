package agent

import (
	"bytes"
	"os"
)

// MaxLine is the longest line either side sends, its newline included (see docs/agent.md,
// "Framing").
const MaxLine = 1 << 20

// frame is one line taken from the stream, with the descriptors attributed to it.
type frame struct {
	line    []byte     // without its newline; nil when tooLong
	fds     []*os.File // the descriptors that arrived with the bytes of this line
	tooLong bool       // the line exceeded MaxLine and was discarded
	lostFDs bool       // descriptors meant for this line were cut short (MSG_CTRUNC)
}

// closeFDs closes the descriptors of a frame that will not use them.
func (f *frame) closeFDs() {
	for _, fd := range f.fds {
		fd.Close()
	}
	f.fds = nil
}

// fdsAt are descriptors that arrived with the bytes starting at stream offset off.
type fdsAt struct {
	off   int64
	fds   []*os.File
	trunc bool
}

// splitter cuts a byte stream into lines of at most MaxLine bytes and attributes descriptors to
// lines by stream offset. A sender attaches descriptors only to a sendmsg(2) that starts a line
// declaring them (see docs/agent.md, "Framing"); where that sendmsg's bytes fall in the read that
// returns its descriptors depends on the kernel:
//
//	OS     a read that returns descriptors                       they belong to the line holding
//	Linux  ends within the sendmsg that carried them: it stops   the read's last byte
//	       after that sendmsg's data, but may begin with
//	       earlier data glued in front (unix_stream_read_generic)
//	BSD    begins with that sendmsg's data: the descriptors      the read's first byte
//	       head a record of their own, and a read does not
//	       take data before them with them
type splitter struct {
	buf        []byte  // bytes after the last newline (none while discarding)
	off        int64   // stream offset of buf[0]
	pending    []fdsAt // descriptors not yet attributed, in stream order
	discarding bool    // the current line is over MaxLine: drop bytes up to its newline
	atLastByte bool    // descriptors go with a read's last byte, not its first (see above)
}

func newSplitter() *splitter { return &splitter{atLastByte: fdsWithLastByte} }

// add appends one read's bytes, and the descriptors that came with them, and returns the lines
// it completed.
func (s *splitter) add(data []byte, fds []*os.File, trunc bool) []frame {
	if len(fds) > 0 || trunc {
		at := s.off + int64(len(s.buf))
		if s.atLastByte && len(data) > 0 {
			at += int64(len(data) - 1)
		}
		s.pending = append(s.pending, fdsAt{off: at, fds: fds, trunc: trunc})
	}
	var out []frame
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if s.discarding || len(s.buf)+len(data) > MaxLine-1 {
				// No newline within the limit: the line is too long whatever follows.
				s.off += int64(len(s.buf) + len(data))
				s.buf, s.discarding = s.buf[:0], true
			} else {
				s.buf = append(s.buf, data...)
			}
			return out
		}
		end := s.off + int64(len(s.buf)+i) // the newline's offset
		f := frame{tooLong: s.discarding || len(s.buf)+i > MaxLine-1}
		if !f.tooLong {
			f.line = append(append(make([]byte, 0, len(s.buf)+i), s.buf...), data[:i]...)
		}
		s.attribute(&f, end)
		out = append(out, f)
		s.buf, s.off, s.discarding = s.buf[:0], end+1, false
		data = data[i+1:]
	}
	return out
}

// attribute gives f every pending descriptor that arrived at an offset up to end, the offset of
// f's newline.
func (s *splitter) attribute(f *frame, end int64) {
	n := 0
	for _, p := range s.pending {
		if p.off > end {
			break
		}
		f.fds = append(f.fds, p.fds...)
		f.lostFDs = f.lostFDs || p.trunc
		n++
	}
	s.pending = s.pending[n:]
}

// close closes every descriptor not attributed to a line: those of a line the stream ended in.
func (s *splitter) close() {
	for _, p := range s.pending {
		for _, fd := range p.fds {
			fd.Close()
		}
	}
	s.pending = nil
}
