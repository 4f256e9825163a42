package bench

// The Git-at-scale scenarios: status pushes, a commit changing hundreds of
// stack sets, the next commit after a first deployment, and resident
// memory, on a remote whose main has a long history (docs/design.md §10).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stackd/stackd/gitsource"
)

// longHistory is the length of the long history: the 20,000 commits on
// main of the remote the figures of issue 28 were taken on.
const longHistory = 20000

// The Git-at-scale scenarios' sizes (stack sets of one instance of one
// file each); --accounts, when not at its default, is the number of stack
// sets instead.
const (
	commit300Sets  = 300
	nextCommitSets = 50
	// statusPushWrites is how many status writes status-push times on
	// each remote.
	statusPushWrites = 15
	// laterCommits is how many commits follow the first after a
	// deployment (next-commit-long-history) or make the daemon's
	// working set (the rss- scenarios).
	laterCommits = 5
)

// stackSetsSize sizes a scenario of n stack sets.
func stackSetsSize(n int) func(Config, *Result) {
	return func(c Config, res *Result) {
		sets := n
		if c.Accounts != DefaultAccounts {
			sets = c.Accounts
		}
		res.StackSets, res.Regions, res.Accounts, res.ResourcesPerInst = sets, 1, sets, 1
	}
}

// statusPush: status writes of a daemon on a remote of 1 and of 20,000
// commits, over file:// and git:// (git daemon on 127.0.0.1), taken in
// turns so that the machine's noise falls on all of them alike.
func statusPush(ctx context.Context, r *run) error {
	root := filepath.Join(r.dir, "remotes")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	port, stop, err := gitDaemon(ctx, root)
	if err != nil {
		return err
	}
	defer stop()
	type setup struct {
		c Case
		g *gitFleet
	}
	var setups []*setup
	defer func() {
		for _, s := range setups {
			s.g.close()
		}
	}()
	files := setsDefs(1, allAt("v1"))
	for _, transport := range []string{"file", "git"} {
		for _, commits := range []int{1, longHistory} {
			name := fmt.Sprintf("%s-%d", transport, commits)
			bare := filepath.Join(root, name+".git")
			if _, err := makeHistory(bare, commits, files, true); err != nil {
				return err
			}
			url := "file://" + bare
			if transport == "git" {
				url = fmt.Sprintf("git://127.0.0.1:%d/%s.git", port, name)
			}
			g, err := openGitFleet(ctx, r, name, bare, url)
			if err != nil {
				return err
			}
			s := &setup{c: Case{Name: fmt.Sprintf("%s://, %d commits", transport, commits), Transport: transport, HistoryCommits: commits}, g: g}
			setups = append(setups, s)
			// The first deployment starts the status branch: every write
			// timed is an update of it.
			if err := r.reconcileOnce(ctx, g); err != nil {
				return fmt.Errorf("%s: %w", s.c.Name, err)
			}
			if n, err := g.statusCommits(); err != nil || n == 0 {
				return fmt.Errorf("%s: no status branch on the remote after the first deployment (%v)", s.c.Name, err)
			}
		}
	}
	before := make([]int, len(setups))
	for i, s := range setups {
		before[i], _ = s.g.statusCommits()
	}
	lat := make([][]float64, len(setups))
	for n := range statusPushWrites {
		for i, s := range setups {
			w := gitsource.StatusWrite{
				Files:   map[string][]byte{"status/bench.json": fmt.Appendf(nil, "{\"write\": %d}\n", n)},
				Message: fmt.Sprintf("stackd bench: status write %d", n),
			}
			start := time.Now()
			if _, err := s.g.d.Source.WriteStatus(ctx, w); err != nil {
				return fmt.Errorf("%s: status write %d: %w", s.c.Name, n, err)
			}
			lat[i] = append(lat[i], time.Since(start).Seconds())
		}
	}
	for i, s := range setups {
		// Every write is a commit on the remote's status branch.
		after, err := s.g.statusCommits()
		if err != nil || after-before[i] != statusPushWrites {
			return fmt.Errorf("%s: %d status commits on the remote, want %d (%v)", s.c.Name, after-before[i], statusPushWrites, err)
		}
		s.c.setLatencies(lat[i])
		r.res.Cases = append(r.res.Cases, s.c)
	}
	// The long history against the short one, per transport.
	for i := range r.res.Cases {
		c := &r.res.Cases[i]
		if c.HistoryCommits == longHistory {
			base := r.res.Cases[slices.IndexFunc(r.res.Cases, func(b Case) bool { return b.Transport == c.Transport && b.HistoryCommits == 1 })]
			c.VsShortHistory = round3(c.MedianSeconds / base.MedianSeconds)
		}
	}
	return nil
}

// reconcileOnce runs one pass of g's daemon (its loop not started) and
// fails unless everything was applied.
func (r *run) reconcileOnce(ctx context.Context, g *gitFleet) error {
	res, err := g.d.Reconciler.Reconcile(ctx)
	switch {
	case err != nil:
		return err
	case res.Rejected:
		return fmt.Errorf("revision rejected: %v", res.Diagnostics)
	case res.Failed():
		return fmt.Errorf("operation failed: %+v", res.Operations)
	}
	return nil
}

// commit300: one commit changes every one of 300 stack sets on a remote;
// from the push to all deployed, to all their status on the remote, and
// the status commits it took (counted on the remote's status branch).
func commit300(ctx context.Context, r *run) error {
	n := r.res.StackSets
	names := setNames(n)
	bare := filepath.Join(r.dir, "remote.git")
	rev1, err := makeHistory(bare, 1, setsDefs(n, allAt("v1")), true)
	if err != nil {
		return err
	}
	r.res.HistoryCommits = 1
	g, err := openGitFleet(ctx, r, "daemon", bare, "file://"+bare)
	if err != nil {
		return err
	}
	defer g.close()
	start := time.Now()
	g.start(ctx)
	done, err := g.deployed(ctx, rev1, names)
	if err != nil {
		return fmt.Errorf("first deployment: %w", err)
	}
	r.res.CreateSeconds = round3(done.Sub(start).Seconds())
	if _, err := g.statusWritten(ctx, rev1, names); err != nil {
		return fmt.Errorf("first deployment: %w", err)
	}
	created, err := g.statusCommits()
	if err != nil {
		return err
	}
	r.res.CreateStatusCommits = created

	rev2, pushed, err := g.push(setsDefs(n, allAt("v2")), "change every stack set")
	if err != nil {
		return err
	}
	if done, err = g.deployed(ctx, rev2, names); err != nil {
		return err
	}
	r.res.WallSeconds = done.Sub(pushed).Seconds()
	written, err := g.statusWritten(ctx, rev2, names)
	if err != nil {
		return err
	}
	r.res.StatusWrittenSeconds = round3(written.Sub(pushed).Seconds())
	// Stopped, the daemon has pushed everything it owed: what the update
	// cost is every status commit since the first deployment's.
	g.close()
	total, err := g.statusCommits()
	if err != nil {
		return err
	}
	r.res.StatusCommits = total - created
	return nil
}

// nextCommitLongHistory: a first deployment of 50 stack sets on a remote
// whose main has 20,000 commits, then at once a commit changing one of
// them: from its push to its operation's end (the daemon has the first
// deployment's status to push meanwhile). Then laterCommits more, each
// after the previous one's status is on the remote.
func nextCommitLongHistory(ctx context.Context, r *run) error {
	n := r.res.StackSets
	names := setNames(n)
	bare := filepath.Join(r.dir, "remote.git")
	rev, err := makeHistory(bare, longHistory, setsDefs(n, allAt("v1")), true)
	if err != nil {
		return err
	}
	r.res.HistoryCommits = longHistory
	g, err := openGitFleet(ctx, r, "daemon", bare, "file://"+bare)
	if err != nil {
		return err
	}
	defer g.close()
	start := time.Now()
	g.start(ctx)
	done, err := g.deployed(ctx, rev, names)
	if err != nil {
		return fmt.Errorf("first deployment: %w", err)
	}
	r.res.CreateSeconds = round3(done.Sub(start).Seconds())
	first := rev
	var lat []float64
	for i := range laterCommits + 1 {
		v := "v" + strconv.Itoa(i+2)
		rev, pushed, err := g.push(setsDefs(n, func(j int) string {
			if j == 0 {
				return v
			}
			return "v1"
		}), "change "+names[0])
		if err != nil {
			return err
		}
		done, err := g.deployed(ctx, rev, names[:1])
		if err != nil {
			return fmt.Errorf("commit %d: %w", i+1, err)
		}
		if i == 0 {
			r.res.WallSeconds = done.Sub(pushed).Seconds()
			// The first deployment's status, all of it, before the
			// later commits.
			if _, err := g.statusWritten(ctx, first, names[1:]); err != nil {
				return err
			}
		} else {
			lat = append(lat, done.Sub(pushed).Seconds())
		}
		if _, err := g.statusWritten(ctx, rev, names[:1]); err != nil {
			return err
		}
	}
	slices.Sort(lat)
	r.res.MedianSeconds, r.res.MinSeconds, r.res.MaxSeconds = median(lat), lat[0], lat[len(lat)-1]
	g.close()
	if r.res.StatusCommits, err = g.statusCommits(); err != nil {
		return err
	}
	return nil
}

// rssAfterDeployment is an rss- scenario: a daemon on a repository whose
// main has commits commits (a remote over file://, or a local path) deploys
// 50 stack sets, then laterCommits commits each changing one, each waited
// for until its status is in the repository; then its resident memory and
// its Go heap after a collection are read.
func rssAfterDeployment(commits int, local bool) func(ctx context.Context, r *run) error {
	return func(ctx context.Context, r *run) error {
		n := r.res.StackSets
		names := setNames(n)
		repo, arg := filepath.Join(r.dir, "remote.git"), ""
		if local {
			repo = filepath.Join(r.dir, "repo")
			arg = repo
		} else {
			arg = "file://" + repo
		}
		rev, err := makeHistory(repo, commits, setsDefs(n, allAt("v1")), !local)
		if err != nil {
			return err
		}
		r.res.HistoryCommits = commits
		g, err := openGitFleet(ctx, r, "daemon", repo, arg)
		if err != nil {
			return err
		}
		defer g.close()
		start := time.Now()
		g.start(ctx)
		done, err := g.deployed(ctx, rev, names)
		if err != nil {
			return fmt.Errorf("first deployment: %w", err)
		}
		r.res.CreateSeconds = round3(done.Sub(start).Seconds())
		if _, err := g.statusWritten(ctx, rev, names); err != nil {
			return err
		}
		for i := range laterCommits {
			changed := i % n
			rev, _, err := g.push(setsDefs(n, func(j int) string {
				if j == changed {
					return "v" + strconv.Itoa(i+2)
				}
				return "v1"
			}), "change "+names[changed])
			if err != nil {
				return err
			}
			if _, err := g.deployed(ctx, rev, names[changed:changed+1]); err != nil {
				return err
			}
			if _, err := g.statusWritten(ctx, rev, names[changed:changed+1]); err != nil {
				return err
			}
		}
		r.res.WallSeconds = time.Since(start).Seconds()
		// The daemon is idle and still open: what it holds once its Git
		// source has been unused for gitsource.IdleTrimAfter (go-git's pack
		// indexes dropped, freed pages returned) is what it keeps between
		// commits.
		for !g.d.Source.Trimmed() {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mb := func(b uint64) float64 { return round3(float64(b) / (1 << 20)) }
		r.res.HeapMB = mb(ms.HeapAlloc)
		// Heap pages the runtime holds free but has not returned to the
		// system count in RSS.
		r.res.HeapFreeHeldMB = mb(ms.HeapIdle - ms.HeapReleased)
		r.res.HeapPeakMB = mb(ms.HeapSys)
		r.res.RSSMB, r.res.RSSAnonMB, r.res.RSSFileMB = procStatusMB("VmRSS"), procStatusMB("RssAnon"), procStatusMB("RssFile")
		if r.c.MemProfile != "" {
			// Besides the peak's profile (--memprofile), what the idle
			// daemon holds.
			return writeHeapProfile(r.c.MemProfile + ".idle")
		}
		return nil
	}
}

// procStatusMB is a size field of /proc/self/status now (VmRSS, RssAnon,
// RssFile; Linux, 0 elsewhere).
func procStatusMB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				kib, _ := strconv.ParseFloat(f[0], 64)
				return kib / 1024
			}
		}
	}
	return 0
}

// median of sorted values.
func median(sorted []float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	m := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[m]
	}
	return (sorted[m-1] + sorted[m]) / 2
}

// writeHeapProfile writes a heap profile of now to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
