package api

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxEventLine bounds one line of the event stream the client reads.
const maxEventLine = 8 << 20

// Events follows GET /v1/events, calling fn with each event's type and
// data, in order, until ctx ends (its error is returned), fn returns an
// error (returned), or the daemon cannot be reached five times in a row.
// A stream that ends (the daemon dropped a lagging client, or restarted)
// is resumed with the last event id; after a "reset" fn sees the reset
// and should reload what it shows. Each time the stream is (re)connected
// fn is called with an empty type and no data: what changed before the
// subscription is not in the stream, so a caller reloads then too.
func (c *Client) Events(ctx context.Context, fn func(typ string, data []byte) error) error {
	last, failures := "", 0
	for {
		path := "/v1/events"
		if last != "" {
			path += "?last_event_id=" + url.QueryEscape(last)
		}
		resp, err := c.do(ctx, http.MethodGet, path, http.StatusOK, true)
		if err == nil {
			failures = 0
			if err := fn("", nil); err != nil {
				resp.Body.Close()
				return err
			}
			err = readEvents(resp, func(id, typ string, data []byte) error {
				if id != "" {
					last = id
				}
				return fn(typ, data)
			})
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fnErr *callbackError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		if err != nil {
			if failures++; failures >= 5 {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

// callbackError carries the error of Events' fn out of readEvents.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// readEvents parses a text/event-stream until it ends.
func readEvents(resp *http.Response, fn func(id, typ string, data []byte) error) error {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var id, typ string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if typ != "" {
				if err := fn(id, typ, []byte(data.String())); err != nil {
					return &callbackError{err}
				}
			}
			id, typ = "", ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			typ = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}
