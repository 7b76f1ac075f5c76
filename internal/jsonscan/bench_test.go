package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/custody-dev/custody/internal/jsonscan"
)

// ledgerDoc returns a ledger file of n rows shaped like Hermes's spawn-ledger.json, with Python's
// ", " and ": " separators and one row a line.
func ledgerDoc(n int) []byte {
	var b bytes.Buffer
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		pid := 12345 + i*7
		fmt.Fprintf(&b, "\n"+`{"pid": %d, "create_time": 1764428400.%02d, "purpose": "serve", "install": "0123456789ab", `+
			`"spawner_pid": 1234, "spawner_create": 1764428300.5, "registered_at": 1764428401.25, `+
			`"argv": "/usr/bin/python3 -m hermes serve --port %d", "host": "127.0.0.1", "port": %d, `+
			`"profile": "default", "hermes_home": "/home/user/.hermes", "isolated": false, "boot_start": 12345.67, `+
			`"spawner_boot": 12000.1, "boot_id": "f868fc94-0228-4df5-b061-9b3c65d40f4c", "pgid": %d, `+
			`"start_ticks": %d, "scope": "pgrp", "reapable": true, "generation": 0, "owner": 1234}`,
			pid, i%100, 8080+i, 8080+i, pid, 1234567+i)
	}
	b.WriteString("\n]\n")
	return b.Bytes()
}

// extracted is what the benchmarks pull out of each row, so that no work is optimised away.
type extracted struct {
	pid, startTicks int64
	createTime      float64
	bootID          string
}

// BenchmarkLedger parses ledgers of the sizes users have, 10, 100 and 1,000 rows, as the ledger
// does: one validating pass, and the identity fields of each row. encoding/json.Valid, which only
// validates, is the floor measured beside it.
func BenchmarkLedger(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		doc := ledgerDoc(n)
		if !json.Valid(doc) {
			b.Fatal("ledgerDoc is not valid JSON")
		}
		rows := make([]extracted, 0, n)
		b.Run(fmt.Sprintf("rows=%d/jsonscan", n), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			done := cpuTimer(b)
			for b.Loop() {
				rows = parse(b, doc, rows[:0])
			}
			done()
			last := n - 1
			if len(rows) != n || rows[last].pid != int64(12345+last*7) || rows[last].startTicks != int64(1234567+last) ||
				rows[last].bootID != "f868fc94-0228-4df5-b061-9b3c65d40f4c" {
				b.Fatalf("got %d rows, last %+v", len(rows), rows[len(rows)-1])
			}
		})
		b.Run(fmt.Sprintf("rows=%d/jsonscan-validate", n), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			done := cpuTimer(b)
			for b.Loop() {
				if err := jsonscan.Array(doc, nil); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
		b.Run(fmt.Sprintf("rows=%d/json.Valid-floor", n), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			done := cpuTimer(b)
			for b.Loop() {
				if !json.Valid(doc) {
					b.Fatal("invalid")
				}
			}
			done()
		})
	}
}

// parse is the ledger's read: every row, and the identity fields of each.
func parse(b *testing.B, doc []byte, rows []extracted) []extracted {
	err := jsonscan.Array(doc, func(elem []byte) error {
		var r extracted
		jsonscan.Members(elem, func(k, v []byte) bool {
			switch string(k) {
			case "pid":
				r.pid, _ = jsonscan.Int(v)
			case "create_time":
				r.createTime, _ = jsonscan.Float(v)
			case "boot_id":
				r.bootID, _ = jsonscan.String(v)
			case "start_ticks":
				r.startTicks, _ = jsonscan.Int(v)
			}
			return true
		})
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return rows
}
