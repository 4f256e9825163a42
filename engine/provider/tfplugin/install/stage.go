package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// stageDirName is the directory under the cache directory where packages
// are downloaded and unpacked before they are renamed into place. Its
// name starts with a dot, so that no provider host can collide with it.
const stageDirName = ".stackd-tmp"

// minStageAge is how old an abandoned stage must be before another
// installer removes it: one minute, far more than the moment between
// creating a stage and locking it.
const minStageAge = time.Minute

// stage is a private working directory for one installation:
// CACHE/.stackd-tmp/install-*/ holding "lock" (locked for the stage's
// lifetime, so that other installers can tell a live stage from the
// remains of a killed process), the downloaded archive and "pkg", the
// unpacked package that is renamed into the cache when complete. Being on
// the cache's file system makes that rename atomic: a package directory
// in the cache is always complete.
type stage struct {
	dir  string
	lock *os.File
}

func newStage(cacheDir string) (*stage, error) {
	root := filepath.Join(cacheDir, stageDirName)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	dir, err := os.MkdirTemp(root, "install-")
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	if ok, err := tryLock(f); err != nil || !ok {
		f.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock staging directory %s: %v", dir, err)
	}
	return &stage{dir: dir, lock: f}, nil
}

func (s *stage) path(name string) string { return filepath.Join(s.dir, name) }

// cleanup removes the stage (what was not renamed into the cache), then
// releases its lock.
func (s *stage) cleanup() {
	os.RemoveAll(s.dir)
	s.lock.Close()
}

// sweepStages removes the stages of installers that died (killed during a
// download): those at least minStageAge old whose lock nobody holds.
func sweepStages(cacheDir string, log zerolog.Logger) {
	root := filepath.Join(cacheDir, stageDirName)
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn().Err(err).Msg("cannot list provider staging directory")
		}
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < minStageAge {
			continue
		}
		if abandoned(dir, info.ModTime()) {
			if err := os.RemoveAll(dir); err == nil {
				log.Info().Str("dir", dir).Msg("removed the remains of an interrupted provider installation")
			}
		}
	}
}

// isNotEmpty: renaming a directory onto a non-empty one.
func isNotEmpty(err error) bool { return errors.Is(err, syscall.ENOTEMPTY) }
