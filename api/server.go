package api

import (
	"log"
	"net/http"
	"time"
)

// Settings of the http.Server that NewHTTPServer returns. Together with the
// per-class Limits they bound what one connection can make the daemon hold
// and for how long.
const (
	// ReadHeaderTimeout bounds reading a request's headers (slowloris): 10 s.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, headers and body, from its
	// first byte: the header's time plus the body's (DefaultBodyTimeout), a
	// backstop for the deadline handlers set on the body themselves. It
	// does not shorten long handlers: net/http clears it once the body is
	// in.
	ReadTimeout = ReadHeaderTimeout + DefaultBodyTimeout
	// WriteTimeout bounds writing a response, from the end of the request's
	// headers: a plan (GET /v1/changesets, up to DefaultPlanTimeout) and
	// 30 s to send it.
	WriteTimeout = DefaultPlanTimeout + 30*time.Second
	// IdleTimeout closes a keep-alive connection idle for 60 s: long enough
	// for a client's next request in a burst (Prometheus scrapes reconnect),
	// short enough that idle connections do not pile up.
	IdleTimeout = 60 * time.Second
	// MaxHeaderBytes caps a request's headers at 32 KiB (Go's default is
	// 1 MiB): a bearer token and a forge's webhook headers take a few KiB,
	// and a connection still in its headers holds at most this much.
	MaxHeaderBytes = 32 << 10
	// http2MaxStreams, http2ConnBuffer and http2StreamBuffer bound an
	// HTTP/2 (TLS) client: 100 streams per connection (Go's default; the
	// classes bound the handlers anyway), and at most 256 KiB per
	// connection and 128 KiB per stream of request data received before a
	// handler reads it (Go's default is 1 MiB each). 128 KiB per stream
	// still moves 1.3 MB/s at 100 ms round trip.
	http2MaxStreams   = 100
	http2ConnBuffer   = 256 << 10
	http2StreamBuffer = 128 << 10
)

// NewHTTPServer returns an http.Server for h with the timeouts and limits
// above; errLog receives the server's own errors (TLS handshakes, accept
// errors). The caller owns the listener, TLS and Shutdown.
func NewHTTPServer(h http.Handler, errLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          http2MaxStreams,
			MaxReceiveBufferPerConnection: http2ConnBuffer,
			MaxReceiveBufferPerStream:     http2StreamBuffer,
		},
		ErrorLog: errLog,
	}
}
