package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tidwall/gjson"

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

func BenchmarkLedger(b *testing.B) {
	doc := ledgerDoc(1000)
	if !json.Valid(doc) {
		b.Fatal("ledgerDoc is not valid JSON")
	}
	rows := make([]extracted, 0, 1000)
	check := func(b *testing.B) {
		b.Helper()
		if len(rows) != 1000 || rows[999].pid != 12345+999*7 || rows[999].startTicks != 1234567+999 ||
			rows[999].createTime != 1764428400.99 || rows[999].bootID != "f868fc94-0228-4df5-b061-9b3c65d40f4c" {
			b.Fatalf("got %d rows, last %+v", len(rows), rows[len(rows)-1])
		}
	}

	b.Run("jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			rows = rows[:0]
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
		}
		check(b)
	})

	// jsonscan-noalloc decodes boot_id into a reused buffer instead of a new string: the parse
	// itself allocates nothing.
	b.Run("jsonscan-noalloc", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			rows = rows[:0]
			err := jsonscan.Array(doc, func(elem []byte) error {
				var r extracted
				jsonscan.Members(elem, func(k, v []byte) bool {
					switch string(k) {
					case "pid":
						r.pid, _ = jsonscan.Int(v)
					case "create_time":
						r.createTime, _ = jsonscan.Float(v)
					case "boot_id":
						buf, _ = jsonscan.AppendString(buf[:0], v)
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
		}
		rows[999].bootID = string(buf)
		check(b)
	})

	// gjson is what the ledger does today: ValidBytes, then ForEach over the rows and their members.
	b.Run("gjson", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			rows = rows[:0]
			if !gjson.ValidBytes(doc) {
				b.Fatal("invalid")
			}
			gjson.ParseBytes(doc).ForEach(func(_, elem gjson.Result) bool {
				var r extracted
				elem.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "pid":
						r.pid = v.Int()
					case "create_time":
						r.createTime = v.Num
					case "boot_id":
						r.bootID = v.Str
					case "start_ticks":
						r.startTicks = v.Int()
					}
					return true
				})
				rows = append(rows, r)
				return true
			})
		}
		check(b)
	})

	b.Run("jsonscan-validate", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if err := jsonscan.Array(doc, nil); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("gjson-validate", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if !gjson.ValidBytes(doc) {
				b.Fatal("invalid")
			}
		}
	})
}
