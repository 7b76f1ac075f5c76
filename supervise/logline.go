package supervise

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// lineHandler writes each record as one line in the style of every custody message on standard
// error, "custody: warning: supervise: refused target: pgid=12 reason=…", rather than slog's
// "time=… level=WARN msg=…": a person reading a terminal meets one style from every verb.
type lineHandler struct {
	w     io.Writer
	mu    *sync.Mutex
	level slog.Leveler
	attrs []slog.Attr
}

func newLineHandler(w io.Writer, level slog.Leveler) *lineHandler {
	return &lineHandler{w: w, mu: new(sync.Mutex), level: level}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], as...)
	return &c
}

// WithGroup is not used by the supervisor; attributes keep their own keys.
func (h *lineHandler) WithGroup(string) slog.Handler { return h }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("custody: ")
	b.WriteString(levelWord(r.Level))
	b.WriteString(": ")
	b.WriteString(r.Message)
	sep := ": "
	attr := func(a slog.Attr) bool {
		b.WriteString(sep)
		sep = " "
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(a.Value.Resolve().String()))
		return true
	}
	r.Attrs(attr)
	for _, a := range h.attrs {
		attr(a)
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func levelWord(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warning"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}

// quoteIfNeeded quotes a value holding a space, a quote or a control character, so that one
// record stays one line and its fields stay apart.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r == '"' || !unicode.IsGraphic(r) }) {
		return strconv.Quote(s)
	}
	return s
}
