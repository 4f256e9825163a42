package config

import "io/fs"

// What terraform_remote_state (engine/provider/tfbuiltin) reads: the
// same files as the file functions (function_files.go) — the definitions'
// tree at the commit, under the directories of the template and of the
// modules it calls, never the daemon's disk — with paths relative to the
// root template's directory, as Terraform's local backend path is
// relative to its working directory. A template that reads remote state
// has those files in its hash, as one calling a file function does, so a
// commit changing a state file it reads plans its instances again.

// remoteStateType is the data source that reads state files.
const remoteStateType = "terraform_remote_state"

// Tree is what a data source reading the template's files
// (terraform_remote_state) is given: the tree it may read, and the root
// template's directory in it, which relative paths start from. The tree
// is nil for a template not loaded from one.
func (t *Template) Tree() (fs.FS, string) {
	if t == nil || t.files == nil {
		return nil, ""
	}
	return t.files, t.Dir
}

// readsRemoteState reports whether t or a module it calls has a
// terraform_remote_state data block.
func (t *Template) readsRemoteState() bool {
	seen := map[*Template]bool{}
	var walk func(t *Template) bool
	walk = func(t *Template) bool {
		if t == nil || seen[t] {
			return false
		}
		seen[t] = true
		for _, d := range t.Data {
			if d.Type == remoteStateType {
				return true
			}
		}
		for _, mc := range t.Modules {
			if walk(mc.Template) {
				return true
			}
		}
		return false
	}
	return walk(t)
}
