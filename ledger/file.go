package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/custody-dev/custody/internal/jsonscan"
)

// CorruptError reports a ledger file that is not a JSON array.
type CorruptError struct {
	Path   string
	Reason string
	// MovedTo is where the file was quarantined, or "" while it is still in place.
	MovedTo string
}

func (e *CorruptError) Error() string {
	if e.MovedTo != "" {
		return fmt.Sprintf("ledger %s was corrupt (%s): moved aside to %s", e.Path, e.Reason, e.MovedTo)
	}
	return fmt.Sprintf("ledger %s is corrupt (%s)", e.Path, e.Reason)
}

// parsed is the content of a ledger file.
type parsed struct {
	rows      []Row
	malformed int // elements that are not rows; dropped at the next write
}

// readFile reads and parses the ledger, decoding the fields d names, and calls each, unless nil,
// with every row as soon as it is decoded (the pointer is valid during the call). A missing file is an empty roster; a file that is not a JSON array is
// a *CorruptError, never an empty roster.
func readFile(path string, d decoding, buf []byte, each func(*Row)) (parsed, []byte, error) {
	p, data, held, err := readHeld(path, d, buf, false, each)
	closeHeld(held)
	return p, data, err
}

// readHeld is readFile for a writer: with hold, it returns the file still open where the OS
// allows it (see [releaseReplaced]), or nil.
func readHeld(path string, d decoding, buf []byte, hold bool, each func(*Row)) (parsed, []byte, *os.File, error) {
	data, held, err := readAll(path, buf, hold)
	if errors.Is(err, fs.ErrNotExist) {
		return parsed{}, nil, nil, nil
	}
	if err != nil {
		return parsed{}, nil, nil, fmt.Errorf("read ledger: %w", err)
	}
	p, err := parse(path, data, d, each)
	return p, data, held, err
}

// parse reads a ledger as leniently as the Hermes reader, so that the two agree on which files
// are corrupt: a UTF-8 byte order mark is skipped, and a file of nothing but white space (0
// bytes: a writer's crash between create and write, or a fresh touch) is an empty roster.
func parse(path string, data []byte, d decoding, each func(*Row)) (parsed, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if len(bytes.TrimSpace(data)) == 0 {
		return parsed{}, nil
	}
	// Rows run to 300-500 bytes; reserving for one in 400 saves most of the slice's doublings,
	// whose fresh pages cost a fault each (15 µs on some virtual machines).
	p := parsed{rows: make([]Row, 0, len(data)/400+1)}
	vals := new(values)
	err := jsonscan.ArrayDepth(data, MaxNesting, func(elem []byte) error {
		p.rows = append(p.rows, Row{}) // decoded in place: a row is 300 bytes to copy
		if r := &p.rows[len(p.rows)-1]; r.decodeFrom(elem, d, vals) {
			if each != nil {
				each(r)
			}
		} else {
			p.rows = p.rows[:len(p.rows)-1]
			p.malformed++
		}
		return nil
	})
	switch {
	case errors.Is(err, jsonscan.ErrTooDeep):
		return parsed{}, fmt.Errorf("ledger %s is unreadable: %v: refusing it, as the Hermes reader does: %w", path, err, ErrTooDeep)
	case errors.Is(err, jsonscan.ErrNotArray):
		return parsed{}, &CorruptError{Path: path, Reason: "not a JSON array"}
	case err != nil:
		return parsed{}, &CorruptError{Path: path, Reason: "not valid JSON: " + err.Error()}
	}
	return p, nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// readInto reads the whole file at path into buf, growing it when too small, and returns the
// bytes read, and with hold the file, still open. The file is opened without following a symbolic
// link and without blocking on a FIFO, and refused unless it is a trusted regular file (see
// [Ledger.Trust]) of at most MaxSize bytes.
func readInto(path string, buf []byte, hold bool) (_ []byte, held *os.File, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if hold && err == nil {
			held = f
		} else {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if err := checkFileInfo(path, fi); err != nil {
		return nil, nil, err
	}
	if err := checkSize(path, fi.Size()); err != nil {
		return nil, nil, err
	}
	if int(fi.Size())+512 > cap(buf) {
		buf = make([]byte, 0, fi.Size()+512) // room for a writer that grew it since
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if err := checkSize(path, int64(len(buf))+1); err != nil { // grown in place since the stat
				return nil, nil, err
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// releaseReplaced closes the replaced ledger file, which a writer holds open from its read until
// its rename is done, and does so off the writer's path. After the rename that descriptor is
// usually the last reference to the old file, and dropping it frees the file: on ext4 that
// eviction costs 100-150 µs, which inside the rename would be most of an append's latency.
func releaseReplaced(f *os.File) {
	if f != nil {
		go f.Close()
	}
}

// closeHeld closes a held file that was not replaced: the file is still linked, so this is cheap.
func closeHeld(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// readBufs holds the write path's read buffers: a write reads the whole ledger, and fresh pages
// for half a megabyte per write cost more than the parse on machines with slow page faults. A
// buffer lives as long as its transaction, whose rows alias it.
var readBufs = sync.Pool{New: func() any { return new([]byte) }}

// writeBufs holds encodeOpen's buffered writers: 64 KiB of fresh heap a write would cost 16 page
// faults where each is slow.
var writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// encode writes rows as the ledger's JSON array, one row a line, each row's bytes as kept. It
// streams through a small buffer: a whole 1,000-row document would be half a megabyte of fresh
// heap per write, and on some virtual machines each fresh page costs a 15 µs fault.
func encode(w io.Writer, rows []Row) error {
	if err := encodeOpen(w, rows); err != nil {
		return err
	}
	return encodeClose(w, len(rows), nil)
}

// encodeOpen writes the opening of the array and rows, leaving it open for more.
func encodeOpen(w io.Writer, rows []Row) error {
	b := writeBufs.Get().(*bufio.Writer)
	b.Reset(w)
	defer func() {
		b.Reset(nil) // drop w
		writeBufs.Put(b)
	}()
	b.WriteString("[")
	for i, r := range rows {
		raw, err := r.Raw()
		if err != nil {
			return fmt.Errorf("encode row for pid %d: %w", r.PID, err)
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(raw)
	}
	return b.Flush()
}

// encodeClose writes one more row (when last is not nil) after n written ones, and the array's end.
func encodeClose(w io.Writer, n int, last []byte) error {
	var b []byte
	if last != nil {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(append(b, '\n'), last...)
	}
	_, err := w.Write(append(b, "\n]\n"...))
	return err
}

// createTemp makes the temporary file a write renames over the ledger: in the same directory, so
// the rename is atomic. The mode is set explicitly: a process umask could otherwise narrow it.
//
// size is what the file is expected to hold. It is reserved on disk at once where the OS can
// (see preallocate), so that the rename over the ledger does not have to start writing the
// data back first.
func createTemp(path string, size int64) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write ledger: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("write ledger: %w", err)
	}
	preallocate(f, size)
	return f, nil
}

// finishTemp completes f with write and renames it over path, so a crash at any instant leaves
// either the old or the new file. No fsync: see the package doc. With keep, f stays open and its
// FileInfo as written is returned (for a snapshot); otherwise f is closed before the rename.
//
// check runs last before the rename; its error (see errStale) is returned as it is, and the
// temporary file is removed.
func finishTemp(f *os.File, path string, write func(io.Writer) error, keep bool, check func() error) (fi os.FileInfo, err error) {
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return nil, fmt.Errorf("write ledger: %w", err)
	}
	if keep {
		fi, err = f.Stat()
	} else {
		err = f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("write ledger: %w", err)
	}
	if err := check(); err != nil {
		return nil, err
	}
	if err := rename(f.Name(), path); err != nil {
		return nil, fmt.Errorf("write ledger: %w", err)
	}
	return fi, nil
}

// quarantine moves a corrupt ledger aside to the first free name of <path>.corrupt,
// <path>.corrupt.2, …, never overwriting an earlier quarantined file: the new name is claimed
// with link(2), which fails when it exists, and only then is the old name removed. The caller
// holds the lock.
func quarantine(path string) (string, error) {
	for i := 1; i < 1000; i++ {
		dst := path + ".corrupt"
		if i > 1 {
			dst += "." + strconv.Itoa(i)
		}
		err := os.Link(path, dst)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("quarantine ledger: %w", err)
		}
		if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("quarantine ledger: %w", err)
		}
		return dst, nil
	}
	return "", fmt.Errorf("quarantine ledger: %s.corrupt.2 to .999 all exist", path)
}

// removeStaleTemps deletes temporary files that writers killed mid-write left behind. The caller
// holds the lock, and a live writer makes its temporary file only under the lock, so every one
// found now belongs to a dead writer. Names are matched literally, never as a pattern: a ledger
// in a directory named "[ab]" or "*" must not take other directories' files for its own.
func removeStaleTemps(path string) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+".tmp-"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
