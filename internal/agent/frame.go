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
// lines by stream offset: descriptors that came with the bytes starting at offset a belong to the
// line that contains byte a. The kernel delivers descriptors with the first byte of the
// sendmsg(2) that carried them and never merges that byte into an earlier read, so the offset of
// a read that returned descriptors is the offset of that sendmsg's data.
type splitter struct {
	buf        []byte  // bytes after the last newline
	off        int64   // stream offset of buf[0] (or of the next byte, while discarding)
	pending    []fdsAt // descriptors not yet attributed, in stream order
	discarding bool    // the current line is over MaxLine: drop bytes up to its newline
}

// add appends one read's bytes, and the descriptors that came with them, and returns the lines
// it completed.
func (s *splitter) add(data []byte, fds []*os.File, trunc bool) []frame {
	start := s.off + int64(len(s.buf))
	if s.discarding {
		start = s.off
	}
	if len(fds) > 0 || trunc {
		s.pending = append(s.pending, fdsAt{off: start, fds: fds, trunc: trunc})
	}
	var out []frame
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if s.discarding {
			if i < 0 {
				s.off += int64(len(data))
				return out
			}
			end := s.off + int64(i) // the newline's offset
			f := frame{tooLong: true}
			s.attribute(&f, end)
			out = append(out, f)
			s.off = end + 1
			s.discarding = false
			data = data[i+1:]
			continue
		}
		if i < 0 {
			if len(s.buf)+len(data) > MaxLine-1 {
				// No newline within the limit: the line is too long whatever follows.
				s.off += int64(len(s.buf)) + int64(len(data))
				s.buf = s.buf[:0]
				s.discarding = true
				return out
			}
			s.buf = append(s.buf, data...)
			return out
		}
		if len(s.buf)+i > MaxLine-1 {
			end := s.off + int64(len(s.buf)) + int64(i)
			f := frame{tooLong: true}
			s.attribute(&f, end)
			out = append(out, f)
			s.buf = s.buf[:0]
			s.off = end + 1
			data = data[i+1:]
			continue
		}
		line := make([]byte, 0, len(s.buf)+i)
		line = append(append(line, s.buf...), data[:i]...)
		end := s.off + int64(len(line))
		f := frame{line: line}
		s.attribute(&f, end)
		out = append(out, f)
		s.buf = s.buf[:0]
		s.off = end + 1
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
