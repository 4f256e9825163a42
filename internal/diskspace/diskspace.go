package diskspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// DefaultMin is the default threshold: 256 MiB. An operation started just
// above it still has room for what it writes - state records (kilobytes
// per resource), Badger's memtable flushes and compactions (tens of MiB),
// status commits, and the files of its instances under the targets root -
// and the state's own last-resort floor (state.MinFreeSpace, 64 MiB, below
// which writes are refused to keep Badger from dying of SIGBUS) stays a
// quarter of the way down.
const DefaultMin = 256 << 20

// Dir is one directory watched: Name says what it is ("state",
// "targets"), Path where.
type Dir struct {
	Name, Path string
}

// Options configure a Checker.
type Options struct {
	// Min is the threshold in bytes; 0 switches the gate off (free space
	// is still measured and exported).
	Min uint64
	// Dirs are the directories whose file systems are checked.
	Dirs []Dir
	// Log gets a warning when a directory falls below Min and a note when
	// all are above it again.
	Log zerolog.Logger
	// Free measures a directory's free bytes (default: statfs); tests
	// replace it.
	Free func(path string) (uint64, error)
}

// Checker checks free space. It is safe for concurrent use.
type Checker struct {
	opts Options

	mu  sync.Mutex
	low map[string]bool // by Dir.Path: below Min at the last reading
}

// New returns a Checker.
func New(opts Options) *Checker {
	if opts.Free == nil {
		opts.Free = statfs
	}
	return &Checker{opts: opts, low: map[string]bool{}}
}

// LowError says that a directory's file system has less free space than
// the threshold.
type LowError struct {
	Dir  Dir
	Free uint64
	Min  uint64
}

func (e *LowError) Error() string {
	return fmt.Sprintf("free space for the %s (%s) is %s, below the minimum of %s", e.Dir.Name, e.Dir.Path, humanize.IBytes(e.Free), humanize.IBytes(e.Min))
}

// reading is one directory's free space, or why it could not be read.
type reading struct {
	dir  Dir
	free uint64
	err  error
}

// read measures every directory and logs the directories that fell below
// the threshold or came back above it since the last reading.
func (c *Checker) read() []reading {
	out := make([]reading, len(c.opts.Dirs))
	for i, d := range c.opts.Dirs {
		out[i] = reading{dir: d}
		out[i].free, out[i].err = c.opts.Free(existing(d.Path))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range out {
		low := r.err == nil && r.free < c.opts.Min
		if low == c.low[r.dir.Path] {
			continue
		}
		c.low[r.dir.Path] = low
		ev := c.opts.Log.Info()
		msg := "disk space back above the minimum: operations may start"
		if low {
			ev, msg = c.opts.Log.Warn(), "low disk space: no operation starts until space is freed"
		}
		ev.Str("dir", r.dir.Name).Str("path", r.dir.Path).Uint64("free_bytes", r.free).Uint64("min_free_bytes", c.opts.Min).Msg(msg)
	}
	for _, r := range out {
		if r.err != nil {
			c.opts.Log.Error().Err(r.err).Str("dir", r.dir.Name).Str("path", r.dir.Path).Msg("cannot measure free disk space")
		}
	}
	return out
}

// CheckSpace returns nil if every directory has at least the threshold
// free (or the threshold is 0), else the *LowError of each that has not
// (joined).
func (c *Checker) CheckSpace() error {
	if c.opts.Min == 0 {
		return nil
	}
	var errs []error
	for _, r := range c.read() {
		if r.err == nil && r.free < c.opts.Min {
			errs = append(errs, &LowError{Dir: r.dir, Free: r.free, Min: c.opts.Min})
		}
	}
	return errors.Join(errs...)
}

// Ready is CheckSpace for /readyz: false and the reason while a directory
// is below the threshold.
func (c *Checker) Ready() (bool, string) {
	err := c.CheckSpace()
	if err == nil {
		return true, ""
	}
	return false, strings.ReplaceAll(err.Error(), "\n", "; ") + ": no operation starts until space is freed"
}

// existing returns path, or its nearest parent that exists (a targets root
// is created by the first deploy).
func existing(path string) string {
	p := filepath.Clean(path)
	for {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

// Metric descriptions.
var (
	freeDesc = prometheus.NewDesc("stackd_free_space_bytes",
		"Free bytes (for unprivileged writers) on the file system of a directory stackd writes to, by path.", []string{"path"}, nil)
	minDesc = prometheus.NewDesc("stackd_min_free_space_bytes",
		"The free-space threshold (--min-free-space) below which no operation starts; 0: off.", nil, nil)
	lowDesc = prometheus.NewDesc("stackd_low_disk",
		"1 while a directory stackd writes to has less free space than --min-free-space (no operation starts), else 0.", nil, nil)
)

// Collector returns a Prometheus collector that measures the directories
// at every scrape.
func (c *Checker) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Checker }

func (col collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- freeDesc
	ch <- minDesc
	ch <- lowDesc
}

func (col collector) Collect(ch chan<- prometheus.Metric) {
	low := 0.0
	seen := map[string]bool{}
	for _, r := range col.c.read() {
		if r.err != nil {
			continue
		}
		if col.c.opts.Min > 0 && r.free < col.c.opts.Min {
			low = 1
		}
		if !seen[r.dir.Path] {
			seen[r.dir.Path] = true
			ch <- prometheus.MustNewConstMetric(freeDesc, prometheus.GaugeValue, float64(r.free), r.dir.Path)
		}
	}
	ch <- prometheus.MustNewConstMetric(minDesc, prometheus.GaugeValue, float64(col.c.opts.Min))
	ch <- prometheus.MustNewConstMetric(lowDesc, prometheus.GaugeValue, low)
}
