package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/stackd/stackd/state"
)

// termProgress is stackd apply's progress bar on a terminal: one bar for
// the instances of every operation of the pass, redrawn below the log
// lines. It is the log's writer too, so that a log line first clears the
// bar and the bar comes back under it.
type termProgress struct {
	mu     sync.Mutex
	out    io.Writer
	bar    *progressbar.ProgressBar
	total  int
	done   int
	failed int
	closed bool
}

func newTermProgress(out io.Writer, color bool) *termProgress {
	p := &termProgress{out: out}
	p.bar = progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetDescription("instances"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionEnableColorCodes(color),
		progressbar.OptionSetRenderBlankState(false),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
	return p
}

// OperationStarted adds the operation's instances to the bar.
func (p *termProgress) OperationStarted(_ string, instances int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.total += instances
	p.bar.ChangeMax(p.total)
	_ = p.bar.Set(p.done)
}

// InstanceSettled moves the bar by one; failures are counted in its
// description.
func (p *termProgress) InstanceSettled(_ string, status state.InstanceStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if p.closed {
		return
	}
	if status == state.InstanceOperationFailed {
		p.failed++
		p.bar.Describe(fmt.Sprintf("instances (%d failed)", p.failed))
	}
	_ = p.bar.Set(p.done)
}

// Write writes a log line above the bar.
func (p *termProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.total > 0 && !p.closed
	if live {
		_ = p.bar.Clear()
	}
	n, err := p.out.Write(b)
	if live && bytes.HasSuffix(b, []byte("\n")) {
		_ = p.bar.Set(p.done) // redraw
	}
	return n, err
}

// Close takes the bar off the terminal; the summary follows.
func (p *termProgress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total > 0 && !p.closed {
		_ = p.bar.Clear()
	}
	p.closed = true
}
