package tfplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine/provider"
)

// maxLogLine bounds one forwarded log line: 64 KiB. A provider that writes
// a longer line without a newline (a dump) gets it cut into pieces of that
// size instead of growing our buffer without bound.
const maxLogLine = 64 << 10

// logWriter receives go-plugin's hclog output (JSON, one entry per Write):
// the provider's own log lines, its raw stderr, and go-plugin's messages.
// Each becomes a zerolog debug event with the provider's level as a field.
type logWriter struct {
	log    zerolog.Logger
	redact provider.Redactor

	mu   sync.Mutex
	exit string // go-plugin's "plugin process exited" error, e.g. "exit status 2"
}

func (w *logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte{'\n'}) {
		w.entry(line)
	}
	return len(p), nil
}

func (w *logWriter) entry(line []byte) {
	if len(line) == 0 {
		return
	}
	if w.log.GetLevel() > zerolog.DebugLevel && !bytes.Contains(line, []byte("plugin process exited")) {
		return // not logged: not worth parsing
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		w.line("log", string(line))
		return
	}
	msg, _ := m["@message"].(string)
	if msg == "plugin process exited" {
		if e, ok := m["error"].(string); ok {
			w.mu.Lock()
			w.exit = e
			w.mu.Unlock()
		}
	}
	if w.log.GetLevel() > zerolog.DebugLevel {
		return
	}
	ev := w.log.Debug()
	for k, v := range m {
		switch k {
		case "@message", "@timestamp":
		case "@level":
			ev = ev.Interface("provider_level", v)
		case "@module":
			ev = ev.Interface("module", v)
		default:
			if s, ok := v.(string); ok {
				ev = ev.Str(k, w.clean(s))
			} else {
				ev = ev.Str(k, w.clean(fmt.Sprint(v)))
			}
		}
	}
	ev.Msg(w.clean(msg))
}

// line forwards one plain line (stdout or stderr of the provider).
func (w *logWriter) line(stream, s string) {
	if w.log.GetLevel() > zerolog.DebugLevel || s == "" {
		return
	}
	w.log.Debug().Str("stream", stream).Msg(w.clean(s))
}

func (w *logWriter) clean(s string) string {
	if w.redact == nil {
		return s
	}
	return w.redact.Redact(s)
}

func (w *logWriter) exitStatus() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exit
}

// lineWriter cuts a stream into lines for emit.
type lineWriter struct {
	emit func(string)
	mu   sync.Mutex
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(string(bytes.TrimRight(w.buf[:i], "\r")))
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) >= maxLogLine {
		w.emit(string(w.buf[:maxLogLine]))
		w.buf = w.buf[maxLogLine:]
	}
	w.buf = append([]byte(nil), w.buf...)
	return len(p), nil
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}
