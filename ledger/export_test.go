package ledger

import "context"

// Begin and BeginAppend open a write as Update and Add do, for tests that hold it open.
func Begin(l *Ledger, ctx context.Context) (*Txn, error)       { return l.begin(ctx, true) }
func BeginAppend(l *Ledger, ctx context.Context) (*Txn, error) { return l.beginAppend(ctx) }

// Commit completes a write opened by Begin.
func Commit(tx *Txn, replaced []int, fn func(rows []Row) ([]Row, error)) (Report, error) {
	return tx.commit(replaced, fn)
}

// EncodeRow is the row encoder Raw uses for a row not read from a file.
func EncodeRow(r Row) ([]byte, error) { return encodeRow(r) }
