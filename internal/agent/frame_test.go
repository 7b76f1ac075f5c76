package agent

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestSplitter: lines cut at newlines across reads, descriptors given to the line holding the
// first byte of the read they came with, and a line over MaxLine discarded up to its newline, its
// descriptors with it.
func TestSplitter(t *testing.T) {
	fd := func() *os.File {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b, c := fd(), fd(), fd()
	long := strings.Repeat("x", MaxLine) // with its newline, one byte over
	type read struct {
		data string
		fds  []*os.File
	}
	type want struct {
		line    string
		tooLong bool
		fds     []*os.File
	}
	for _, tc := range []struct {
		desc  string
		reads []read
		want  []want
	}{
		{"two lines in one read", []read{{"one\ntwo\n", nil}}, []want{{line: "one"}, {line: "two"}}},
		{"a line across reads", []read{{"o", nil}, {"ne\nt", nil}, {"wo\n", nil}}, []want{{line: "one"}, {line: "two"}}},
		{"descriptors with their line", []read{{"one\n", nil}, {"two\n", []*os.File{a, b}}, {"three\n", []*os.File{c}}},
			[]want{{line: "one"}, {line: "two", fds: []*os.File{a, b}}, {line: "three", fds: []*os.File{c}}}},
		{"descriptors with lines glued in front (Linux)", []read{{"one\ntwo\n", []*os.File{a}}},
			[]want{{line: "one"}, {line: "two", fds: []*os.File{a}}}},
		{"descriptors with a line cut short (Linux)", []read{{"one\ntw", []*os.File{a}}, {"o\n", nil}},
			[]want{{line: "one"}, {line: "two", fds: []*os.File{a}}}},
		{"the longest line", []read{{long[1:] + "\n", nil}, {"next\n", nil}}, []want{{line: long[1:]}, {line: "next"}}},
		{"over the limit in one read", []read{{long + "\n", []*os.File{a}}, {"next\n", nil}},
			[]want{{tooLong: true, fds: []*os.File{a}}, {line: "next"}}},
		{"over the limit across reads", []read{{long[:10], nil}, {long[10:], []*os.File{a}}, {"yy", nil}, {"y\n", []*os.File{b}},
			{"next\n", []*os.File{c}}},
			[]want{{tooLong: true, fds: []*os.File{a, b}}, {line: "next", fds: []*os.File{c}}}},
	} {
		s := splitter{atLastByte: true}
		var got []frame
		for _, r := range tc.reads {
			got = append(got, s.add([]byte(r.data), r.fds, false)...)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d lines, want %d", tc.desc, len(got), len(tc.want))
			continue
		}
		for i, w := range tc.want {
			g := got[i]
			if !bytes.Equal(g.line, []byte(w.line)) || g.tooLong != w.tooLong || len(g.fds) != len(w.fds) {
				t.Errorf("%s: line %d: %.20q too long %v with %d descriptors, want %.20q %v %d", tc.desc, i, g.line,
					g.tooLong, len(g.fds), w.line, w.tooLong, len(w.fds))
				continue
			}
			for j := range w.fds {
				if g.fds[j] != w.fds[j] {
					t.Errorf("%s: line %d: descriptor %d is not the one sent with it", tc.desc, i, j)
				}
			}
		}
		if len(s.pending) != 0 {
			t.Errorf("%s: descriptors left unattributed", tc.desc)
		}
	}
}

// TestSplitterFirstByte: where a read's descriptors go with its first byte (the BSDs), lines
// glued after the line that carried them do not take them.
func TestSplitterFirstByte(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := splitter{atLastByte: false}
	got := s.add([]byte("one\n"), nil, false)
	got = append(got, s.add([]byte("two\nthree\n"), []*os.File{f}, false)...)
	if len(got) != 3 || len(got[0].fds) != 0 || len(got[1].fds) != 1 || len(got[2].fds) != 0 {
		t.Errorf("descriptors went to %d, %d, %d descriptors per line, want 0, 1, 0", len(got[0].fds), len(got[1].fds),
			len(got[2].fds))
	}
}
