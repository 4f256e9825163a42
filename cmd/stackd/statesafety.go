package main

// The state's safety nets, wired: backups that verify, a damaged or lost
// state that stops deploys, and the free-space gate.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/internal/diskspace"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// addStateSafetyFlags adds --adopt-empty-state and --min-free-space.
func (c *repoConfig) addStateSafetyFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.adoptEmptyState, "adopt-empty-state", false,
		"deploy from an empty state although the status branch shows deployed stack sets (every instance is created again); "+
			"a state directory that cannot be opened is moved aside to <state-dir>.damaged-<time>. Give it once, not in a unit file")
	c.minFreeSpace = diskspace.DefaultMin
	f.Var(&c.minFreeSpace, "min-free-space",
		"free space the file systems of --state-dir and --targets-root must keep (e.g. 512MiB, 2GB; 0: no check): "+
			"below it no operation starts, /readyz is not ready and stackd_low_disk is 1")
}

// byteSize is a flag value in bytes, written like 256MiB, 1GB or 0.
type byteSize uint64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }
func (b *byteSize) Type() string   { return "size" }
func (b *byteSize) Set(v string) error {
	n, err := humanize.ParseBytes(v)
	if err != nil {
		return fmt.Errorf("%q is not a size (examples: 256MiB, 2GB, 0)", v)
	}
	*b = byteSize(n)
	return nil
}

// spaceChecker builds the free-space gate of the state directory and the
// targets root, with its metrics in the daemon's registry.
func (c *repoConfig) spaceChecker(log zerolog.Logger, metrics *api.Metrics) *diskspace.Checker {
	space := diskspace.New(diskspace.Options{
		Min:  uint64(c.minFreeSpace),
		Dirs: []diskspace.Dir{{Name: "state directory", Path: c.stateDir}, {Name: "targets root", Path: c.targetsRoot}},
		Log:  log,
	})
	metrics.Registry().MustRegister(space.Collector())
	return space
}

// openState opens --state-dir. A damaged one is refused with what to do
// about it; with --adopt-empty-state it is moved aside (never deleted) and
// an empty state starts in its place.
func (c *repoConfig) openState(log zerolog.Logger) (*state.Store, error) {
	st, err := c.stateKey.open(c.stateDir)
	if !errors.Is(err, state.ErrDamaged) {
		return st, err
	}
	if !c.adoptEmptyState {
		return nil, fmt.Errorf("%w\n%s", err, damagedHowTo(c.stateDir))
	}
	dir := filepath.Clean(c.stateDir)
	aside := dir + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	if rerr := os.Rename(dir, aside); rerr != nil {
		return nil, fmt.Errorf("%w\n--adopt-empty-state: cannot move it aside: %v", err, rerr)
	}
	log.Warn().Str("state_dir", c.stateDir).Str("moved_to", aside).Str("damage", err.Error()).
		Msg("damaged state moved aside; starting from an empty state (--adopt-empty-state)")
	return c.stateKey.open(c.stateDir)
}

// damagedHowTo says how to go on from a damaged state directory.
func damagedHowTo(dir string) string {
	return fmt.Sprintf(`To restore a backup, move the damaged directory aside and restore into its place:
    mv %[1]s %[1]s.damaged && stackd state restore FILE --state-dir %[1]s
To start from an empty state instead (every instance is created again), run with --adopt-empty-state:
it moves the damaged directory aside by itself.`, dir)
}

// emptyStateHowTo says how to go on from a lost state.
func emptyStateHowTo(dir string) string {
	return fmt.Sprintf(`To restore a backup, stop stackd, then (the directory must be new or empty):
    mv %[1]s %[1]s.lost && stackd state restore FILE --state-dir %[1]s
To start from the empty state instead (every instance is created again), run once with --adopt-empty-state.`, dir)
}

// explain adds to an error of a pass what the user can do about it.
func (c *repoConfig) explain(err error) error {
	var empty *reconciler.EmptyStateError
	var low *diskspace.LowError
	switch {
	case errors.As(err, &empty):
		return fmt.Errorf("%w\n%s", err, emptyStateHowTo(c.stateDir))
	case errors.As(err, &low):
		return fmt.Errorf("%w\nfree some space, or lower the threshold with --min-free-space (now %s); nothing was started", err, humanize.IBytes(uint64(c.minFreeSpace)))
	}
	return err
}

// checkStateAtStart refuses to start the daemon on a lost state. Other
// failures to check (the status branch unreadable) are left to the passes,
// which check again before deploying anything.
func (c *repoConfig) checkStateAtStart(ctx context.Context, a *app) error {
	err := a.rec.CheckState(ctx)
	var empty *reconciler.EmptyStateError
	if errors.As(err, &empty) {
		return c.explain(err)
	}
	if err != nil {
		a.log.Warn().Err(err).Msg("cannot check the state against the status branch yet; every pass checks again before deploying")
	}
	return nil
}

// restoreBackup restores the backup in file into stateDir (new or empty):
// a verified backup, or with legacy one in the format stackd wrote before
// backups carried a checksum.
func restoreBackup(stateDir, file string, legacy bool, key []byte) (state.BackupInfo, error) {
	f, err := os.Open(file)
	if err != nil {
		return state.BackupInfo{}, err
	}
	defer f.Close()
	if legacy {
		return state.RestoreLegacy(stateDir, f)
	}
	info, err := state.RestoreWith(stateDir, f, key)
	switch {
	case errors.Is(err, state.ErrLegacyBackup):
		return info, fmt.Errorf("%s: %w: it was written by an older stackd and cannot be verified; nothing was restored. "+
			"Restore it anyway with `stackd state restore --legacy %s --state-dir %s`, then take a new backup", file, err, file, stateDir)
	case errors.Is(err, state.ErrBadBackup):
		return info, fmt.Errorf("%s: %w; nothing was restored, %s is unchanged", file, err, stateDir)
	}
	return info, err
}

// verifyBackup checks a backup file without restoring it.
func verifyBackup(file string, key []byte) (state.BackupInfo, error) {
	f, err := os.Open(file)
	if err != nil {
		return state.BackupInfo{}, err
	}
	defer f.Close()
	info, err := state.VerifyWith(f, key)
	if err != nil {
		return info, fmt.Errorf("%s: %w", file, err)
	}
	return info, nil
}

// backupSummary is "12 KiB, taken 2026-01-02T03:04:05Z, sha256 1a2b3c4d5e6f"
// (Verify and Restore only return a version-1 info without error).
func backupSummary(info state.BackupInfo) string {
	if info.Version == 0 {
		return "legacy format, unverified"
	}
	return fmt.Sprintf("%s, taken %s, sha256 %s", humanize.IBytes(uint64(info.Bytes)), info.Created.Format(time.RFC3339), info.SHA256[:12])
}
