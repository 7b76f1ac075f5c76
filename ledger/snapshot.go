package ledger

import "os"

// snapshot is the ledger file a handle last wrote, kept so that its next write can skip reading
// and parsing it again while the file is still that one: an owner writes twice per child, and
// nobody else has usually written in between. It holds:
//
//   - the file, open: while a descriptor holds it the inode cannot be freed, so its number
//     cannot be given to another file, and "the ledger is the same file" is a proof, not a guess;
//   - its size and modification time as written, which an in-place edit by another program
//     (against the protocol, but possible) would change;
//   - the rows written, decoded as a fresh read decodes them (identity fields only), which alias
//     buf.
//
// Only where a writer may hold the old file open through a rename over it (holdFiles).
type snapshot struct {
	file *os.File
	fi   os.FileInfo
	buf  *[]byte // from readBufs
	rows []Row
}

// current reports whether the ledger at path is still the snapshot's file, unchanged. Lstat: a
// symbolic link planted in its place is not it, and goes through the full read and its checks.
func (s *snapshot) current(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, s.fi) && fi.Size() == s.fi.Size() && fi.ModTime().Equal(s.fi.ModTime())
}

// release gives up a snapshot that is not used.
func (s *snapshot) release() {
	closeHeld(s.file)
	readBufs.Put(s.buf)
}

// takeSnapshot removes and returns the handle's snapshot, or nil: a transaction owns it from
// then on (its rows are pruned in place), and gives back a new one only if it writes.
func (l *Ledger) takeSnapshot() *snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.last
	l.last = nil
	return s
}

func (l *Ledger) keepSnapshot(s *snapshot) {
	l.mu.Lock()
	old := l.last
	l.last = s
	l.mu.Unlock()
	if old != nil { // another transaction of this handle finished after ours began: keep the newer
		old.release()
	}
}

// snapshotRows returns rows as a fresh read of their bytes would: a row built or changed by the
// caller (no bytes yet, or fields decoded beyond identity by Set) is encoded and decoded again.
// A row read from the file and returned unchanged is taken as it is: its bytes, which are what
// was written, decoded to what it holds. (A caller that assigned a field of such a row directly
// wrote the old bytes, as documented on Row, and the snapshot keeps the assignment: a misuse
// whose effect lasts until the next write by another handle.)
func snapshotRows(rows []Row) ([]Row, error) {
	for i := range rows { // by index: a Row is a few hundred bytes, and copying each adds up
		if rows[i].identityOnly {
			continue
		}
		raw, err := rows[i].Raw()
		if err != nil {
			return nil, err
		}
		rows[i], _ = decodeRow(raw, decodeIdentity, nil)
	}
	return rows, nil
}

// keepDecoded decodes s's rows from kept on as a read decodes them (see snapshotRows) and keeps
// s as the handle's snapshot.
func (l *Ledger) keepDecoded(s *snapshot, kept int) {
	if _, err := snapshotRows(s.rows[kept:]); err != nil { // cannot happen: the rows were just encoded
		s.release()
		return
	}
	l.keepSnapshot(s)
}
