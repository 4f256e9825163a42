package main

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// busyBranchTargets and busyBranchWork make the pull-request branch of the
// push-latency-busy scenario expensive to plan: 200 instances whose
// template hashes busyBranchWork thousand strings each (about 0.15 s per instance
// on the machine the figures in docs/performance.md come from).
const (
	busyBranchRegions, busyBranchAccounts = 20, 10
	busyBranchWork                        = 5 // thousands of hashes per instance
)

// busyBranchDefs is the expensive branch: a stack set of 200 instances
// whose plan is honest but slow. version makes each push a new head.
func busyBranchDefs(version string) map[string]string {
	files := fleetDefs(busyBranchRegions, busyBranchAccounts, 1, false, version)
	files["template/main.hcl"] += fmt.Sprintf(`
locals {
  digest = sha256(join(",", flatten([for i in range(1000) : [for j in range(%d) : sha256("${target.account}-${target.region}-${i}-${j}")]])))
}

resource "file" "digest" {
  path    = "fleet/digest"
  content = local.digest
}
`, busyBranchWork)
	return files
}

// pushLatencyBusy is pushLatency while a pull-request branch that takes
// tens of seconds to plan is pushed before each commit to the deploy
// branch, so that branch planning runs the whole time. It also reports how
// long one plan of that branch takes.
func (f *benchFleet) pushLatencyBusy(ctx context.Context, n int, res *benchResult) error {
	if err := storeBranch(f.repo, "busy", busyBranchDefs("busy-0")); err != nil {
		return err
	}
	start := time.Now()
	plan, err := f.app.rec.Plan(ctx, "busy")
	if err != nil {
		return err
	}
	if len(plan.Diagnostics) > 0 {
		return fmt.Errorf("the busy branch does not plan: %v", plan.Diagnostics)
	}
	res.PlanSeconds = time.Since(start).Seconds()
	i := 0
	lat, err := f.measurePushes(ctx, n, func() error {
		i++
		return storeBranch(f.repo, "busy", busyBranchDefs(fmt.Sprintf("busy-%d", i)))
	})
	if err != nil {
		return err
	}
	res.MedianSeconds, res.MinSeconds, res.MaxSeconds = lat[len(lat)/2], lat[0], lat[len(lat)-1]
	return nil
}

// measurePushes runs the daemon loop on the fleet's repository and
// measures, for n commits to the deploy branch, the time from the commit
// being written to its operation starting (the "operation started" log
// line). before, if set, runs before each commit. The latencies are
// returned sorted.
func (f *benchFleet) measurePushes(ctx context.Context, n int, before func() error) ([]float64, error) {
	if err := f.reconcile(ctx); err != nil {
		return nil, err
	}
	f.app.Close()
	started := make(chan time.Time, 16)
	cfg := f.cfg
	cfg.logLevel = "info"
	app, err := cfg.open(ctx, &lineWatcher{match: []byte(`"operation started"`), ch: started})
	if err != nil {
		return nil, err
	}
	f.app = app
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { app.rec.Run(runCtx, app.source.Watch(runCtx, time.Hour), time.Second) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	var lat []float64
	for i := 0; i < n; i++ {
		if before != nil {
			if err := before(); err != nil {
				return nil, err
			}
		}
		files := fleetDefs(1, 1, 1, false, fmt.Sprintf("push-%d", i))
		t0 := time.Now()
		if err := f.commit(files); err != nil {
			return nil, err
		}
		select {
		case t1 := <-started:
			lat = append(lat, t1.Sub(t0).Seconds())
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("commit %d: no operation started within 30s", i)
		}
		// Let the operation finish before the next commit.
		if err := waitIdle(ctx, app); err != nil {
			return nil, err
		}
	}
	sort.Float64s(lat)
	return lat, nil
}

// storeBranch points branch at a new commit holding exactly files (on top
// of the branch's previous head, if any), without touching the work tree.
func storeBranch(repo *git.Repository, branch string, files map[string]string) error {
	root, err := storeTree(repo, files, "")
	if err != nil {
		return err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	var parents []plumbing.Hash
	if old, err := repo.Reference(ref, true); err == nil {
		parents = append(parents, old.Hash())
	}
	sig := object.Signature{Name: "Bench User", Email: "bench@example.com", When: time.Now()}
	c := &object.Commit{Author: sig, Committer: sig, Message: "bench: " + branch, TreeHash: root, ParentHashes: parents}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return err
	}
	h, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return err
	}
	return repo.Storer.SetReference(plumbing.NewHashReference(ref, h))
}

// storeTree stores the tree of the files below dir ("" for the root).
func storeTree(repo *git.Repository, files map[string]string, dir string) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	subdirs := map[string]bool{}
	for name, content := range files {
		rel, ok := strings.CutPrefix(name, dir)
		if !ok {
			continue
		}
		if first, _, nested := strings.Cut(rel, "/"); nested {
			subdirs[first] = true
			continue
		}
		obj := repo.Storer.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write([]byte(content)); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := repo.Storer.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries[rel] = object.TreeEntry{Name: rel, Mode: filemode.Regular, Hash: h}
	}
	for sub := range subdirs {
		h, err := storeTree(repo, files, path.Join(dir, sub)+"/")
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries[sub] = object.TreeEntry{Name: sub, Mode: filemode.Dir, Hash: h}
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	// Git orders tree entries by name, a directory's as if it ended in "/".
	sort.Slice(names, func(a, b int) bool {
		ka, kb := names[a], names[b]
		if entries[ka].Mode == filemode.Dir {
			ka += "/"
		}
		if entries[kb].Mode == filemode.Dir {
			kb += "/"
		}
		return ka < kb
	})
	t := &object.Tree{}
	for _, name := range names {
		t.Entries = append(t.Entries, entries[name])
	}
	obj := repo.Storer.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(obj)
}
