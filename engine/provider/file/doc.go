// Package file is the built-in "file" provider: one regular file under a
// stack instance's root, <targets root>/<account>/<region>/<path>.
//
// Invariants:
//
//   - Paths are jailed. A path must be relative, non-empty, free of NUL bytes
//     and ".." elements, and name a file (no trailing "/"). Every filesystem
//     call goes through an os.Root opened on the instance root, so a symbolic
//     link planted inside the targets root that points outside it is refused
//     rather than followed. CheckRelativePath and OpenInstanceRoot are
//     exported so the command provider applies the same jail to working_dir.
//   - Writes are atomic: a temporary file in the same directory, then a
//     rename. Create is create-or-verify: calling it again with the same
//     properties converges to the same file.
//   - A crash leaves no temporary file behind for good: a write, read or
//     delete of any file in a directory first removes the temporary files
//     there that no write of this process is using (once per directory and
//     process), and deleting a file removes its own. Paths named like those
//     temporary files (.stackd-tmp-<16 hex digits>) are refused.
//   - The physical id and attribute "id" are the relative path; attribute
//     "sha256" is the hex SHA-256 of the content, so Read exposes drift (a
//     different sha256, or provider.ErrNotFound once the file is gone).
//     Something else than a regular file at the path (a named pipe, socket,
//     device or directory) is drift too. Nothing is opened in a way that
//     blocks: a named pipe opened for reading would wait for a writer for
//     ever, and no context ends that wait.
//   - Drift shows content found only when it is short UTF-8 text (at most
//     MaxShownContent bytes), else by its size and SHA-256, and compares
//     it by its SHA-256: status commits, the API and --json stay small and
//     do not publish whole files.
//   - Delete removes the file, then the directories it leaves empty, up to
//     but never including the instance root.
//
// The provider receives unmarked values; it never logs file content.
//
// This package imports engine/provider and the standard library only.
package file
