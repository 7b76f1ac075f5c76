package supervise

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
)

func TestLineHandler(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(newLineHandler(&b, slog.LevelWarn)).With("supervisor", 42)
	log.Debug("supervise: not shown")
	log.Warn("supervise: refused target", "pgid", 1, "reason", "init's group\nor worse")
	log.Error("supervise: signal failed", "err", errors.New("boom"))
	want := "custody: warning: supervise: refused target: pgid=1 reason=\"init's group\\nor worse\" supervisor=42\n" +
		"custody: error: supervise: signal failed: err=boom supervisor=42\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
