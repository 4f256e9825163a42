package gitsource

import (
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// The cache clone of a URL repository is stackd's alone: its directory is 0700 and every
// directory go-git makes in it 0700, every file 0600 (0400 where go-git makes it read-only),
// whatever the umask. go-git's own file system (osfs) creates directories 0755 and files
// 0666 less the umask; privateFS, under which the cache's storage is opened, creates them
// itself with the private modes first. (The cache holds no credentials — see
// splitCredentials — but it holds the repository's content, which is the user's.)
const (
	privateDirMode  = 0o700
	privateFileMode = 0o600
)

// objectCacheSize bounds the decoded objects go-git keeps per repository handle: 16 MiB,
// not its default 96 MiB. It holds what one revision's reads reuse (trees, delta bases,
// definition files); anything that walks the history (go-git's own push did, on every
// status write) would otherwise fill it with old commits and trees and keep them.
const objectCacheSize = 16 * cache.MiByte

// cacheStorage is go-git storage for the cache clone at dir, writing private files.
func cacheStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorage(privateFS{Filesystem: osfs.New(dir), root: dir}, cache.NewObjectLRU(objectCacheSize))
}

// openCache opens the bare cache clone at dir (git.ErrRepositoryNotExists if there is none).
func openCache(dir string) (*git.Repository, error) {
	return git.Open(cacheStorage(dir), nil)
}

// privateFS is a billy file system rooted at root that creates directories 0700 and files
// with no group or other permission bits.
type privateFS struct {
	billy.Filesystem
	root string
}

var (
	_ billy.Filesystem = privateFS{}
	_ billy.Chmod      = privateFS{}
	_ billy.Capable    = privateFS{}
)

// real is where name lies on disk (never outside root).
func (p privateFS) real(name string) string {
	return filepath.Join(p.root, filepath.Clean(string(filepath.Separator)+filepath.FromSlash(name)))
}

// mkdirs makes the directory of name, and those above it, 0700.
func (p privateFS) mkdirs(name string) error {
	return os.MkdirAll(filepath.Dir(p.real(name)), privateDirMode)
}

func (p privateFS) Create(name string) (billy.File, error) {
	return p.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, privateFileMode)
}

func (p privateFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := p.mkdirs(name); err != nil {
			return nil, err
		}
		perm &= privateDirMode
	}
	return p.Filesystem.OpenFile(name, flag, perm)
}

func (p privateFS) Rename(from, to string) error {
	if err := p.mkdirs(to); err != nil {
		return err
	}
	return p.Filesystem.Rename(from, to)
}

func (p privateFS) TempFile(dir, prefix string) (billy.File, error) {
	if err := os.MkdirAll(p.real(dir), privateDirMode); err != nil {
		return nil, err
	}
	return p.Filesystem.TempFile(dir, prefix) // os.CreateTemp: 0600
}

func (p privateFS) MkdirAll(name string, _ os.FileMode) error {
	return os.MkdirAll(p.real(name), privateDirMode)
}

// Chmod keeps the owner's bits only: go-git makes objects and packs 0444, here 0400.
func (p privateFS) Chmod(name string, mode os.FileMode) error {
	return os.Chmod(p.real(name), mode&privateDirMode)
}

func (p privateFS) Chroot(name string) (billy.Filesystem, error) {
	fs, err := p.Filesystem.Chroot(name)
	if err != nil {
		return nil, err
	}
	return privateFS{Filesystem: fs, root: p.real(name)}, nil
}

func (p privateFS) Capabilities() billy.Capability { return billy.Capabilities(p.Filesystem) }
