package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stackd/stackd/state"
)

// Whatever Last-Event-ID (header or last_event_id parameter) a client
// sends, GET /v1/events answers 200 with a well-formed stream — the
// messages after an id of this run it still holds, else a "reset" first —
// or 400 for an id over 64 characters; never a panic, a 500, or a line a
// client would read as a field the server did not send.
func FuzzEventsLastEventID(f *testing.F) {
	st, err := state.Open(filepath.Join(f.TempDir(), "state"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	hub := NewEventHub(st, HubOptions{History: 4})
	for i := range 6 {
		hub.Publish(EventStackSet, map[string]any{"name": "web", "n": i})
	}
	srv, err := New(Options{Store: st, Token: testToken, Events: hub})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", hub.id(0), hub.id(1), hub.id(2), hub.id(5), hub.id(6), hub.id(7), hub.run, hub.run + "-",
		hub.run + "--1", hub.run + "-+3", hub.run + "-18446744073709551615", hub.run + "-18446744073709551616",
		"0-1", "-", "x\nevent: reset\ndata: {}", "a-1\r\nid: b", strings.Repeat("9", 64), strings.Repeat("9", 65), "\xff\xfe-1"} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	fields := []string{"retry:", ":", "id: ", "event: ", "data: "}
	f.Fuzz(func(t *testing.T, last string, inQuery bool) {
		r := httptest.NewRequest(http.MethodGet, "/v1/events", nil)
		if inQuery {
			r.URL.RawQuery = "last_event_id=" + url.QueryEscape(last)
		} else {
			r.Header.Set("Last-Event-ID", last)
		}
		r.Header.Set("Authorization", "Bearer "+testToken)
		ctx, cancel := context.WithCancel(r.Context())
		cancel() // the stream ends after its replay
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r.WithContext(ctx))
		sent := r.Header.Get("Last-Event-ID")
		if inQuery {
			sent = r.URL.Query().Get("last_event_id")
		}
		if len(sent) > 64 {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("Last-Event-ID of %d characters: %d, want 400", len(sent), w.Code)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("Last-Event-ID %q: %d %s", last, w.Code, w.Body)
		}
		body := w.Body.String()
		for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			ok := line == ""
			for _, p := range fields {
				ok = ok || strings.HasPrefix(line, p)
			}
			if !ok || strings.Contains(line, "\r") {
				t.Fatalf("Last-Event-ID %q: the stream has the line %q:\n%s", last, line, body)
			}
		}
		run, num, _ := strings.Cut(sent, "-")
		n, err := strconv.ParseUint(num, 10, 64)
		held := sent == "" || (run == hub.run && err == nil && n <= 6 && n+1 >= 3)
		if reset := strings.Contains(body, "event: "+EventReset+"\n"); reset == held {
			t.Fatalf("Last-Event-ID %q (held %v): reset %v:\n%s", sent, held, reset, body)
		}
		if held && sent != "" {
			if want := int(6 - n); strings.Count(body, "event: "+EventStackSet+"\n") != want {
				t.Fatalf("Last-Event-ID %q: %d messages replayed, want %d:\n%s", sent, strings.Count(body, "event: "+EventStackSet), want, body)
			}
		}
	})
}
