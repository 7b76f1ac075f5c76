package ledger

import (
	"bytes"
	"testing"

	"github.com/custody-dev/custody/procid"
)

// rowsDoc returns a ledger of n rows shaped as custody writes them: every identity field of the
// process and of its spawner, with pidfs ids.
func rowsDoc(tb testing.TB, n int) []byte {
	spawner := procid.Incarnation{ID: procid.ID{PID: 4000, Start: 1000312, PidfdID: 1966326},
		BootID: "a86f3d6e-1a3e-4f4d-b91a-bcb97fc02f47", CreateTime: 1796047663.12, BootStart: 10003.12}
	rows := make([]Row, n)
	for i := range rows {
		inc := spawner
		inc.PID, inc.PidfdID = 5000+i, 1966400+uint64(i)
		rows[i] = newRow(inc, spawner)
		rows[i].Purpose, rows[i].Argv = "serve", "cat"
	}
	var b bytes.Buffer
	if err := encode(&b, rows); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkParse is a reader's parse of 1,000 rows custody wrote (validation and decoding), the
// part of a verified read that is not the proofs: with every field decoded ([Ledger.Rows]), and
// with only what judging liveness reads ([Ledger.Query]).
func BenchmarkParse(b *testing.B) {
	data := rowsDoc(b, 1000)
	for _, c := range []struct {
		name string
		d    decoding
	}{{"full", decodeFull}, {"judge", decodeJudge}, {"identity", decodeIdentity}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p, err := parse("ledger", data, c.d, nil)
				if err != nil || len(p.rows) != 1000 {
					b.Fatalf("%d rows, %v", len(p.rows), err)
				}
			}
		})
	}
}
