// Package tfbuiltin is Terraform's built-in "terraform" provider
// (terraform.io/builtin/terraform) as stackd providers: the resource type
// terraform_data and the data source terraform_remote_state, with
// Terraform 1.11's semantics. They need no plugin: the type names alone
// select them, whether or not a template lists the provider in
// required_providers.
//
// terraform_data (Data) stores a value: properties input and
// triggers_replace (any type), attributes id (a random UUID) and output
// (the input as last applied). A change of triggers_replace replaces the
// resource (provider.Always); a change of input updates it in place, and
// output is unknown until the apply wherever input changed, as in
// Terraform's plan. An import adopts the given id. Nothing exists in the
// world: Read returns what was recorded, so there is never drift.
//
// terraform_remote_state (RemoteState) reads the root outputs of a
// Terraform state (format version 4, as Terraform 0.12 to 1.11 and
// OpenTofu write it) with the "local" backend only, and only from the
// definitions repository's tree at the commit the template was loaded
// from (provider.Request.Tree), never from the daemon's disk:
//
//   - config.path (default "terraform.tfstate") is relative to the root
//     template's directory, as Terraform's is relative to its working
//     directory; workspace other than "default" reads
//     <config.workspace_dir, default "terraform.tfstate.d">/<workspace>/terraform.tfstate,
//     as the local backend does.
//   - Absolute paths are refused with a diagnostic (an absolute path names
//     the daemon's disk, which a template never reads), and so are paths
//     that leave the repository. The engine gives the tree the file
//     functions read (engine/config Template.Tree): only the directories
//     of the template and of its modules, whose files the template's hash
//     covers, so a commit changing a state file plans again; a state file
//     elsewhere is refused with a diagnostic saying so.
//   - Other backends (s3, remote, http, …) are refused with a diagnostic:
//     they would read state from outside the repository with credentials
//     of the daemon's.
//   - outputs is an object of the state's root outputs over the defaults,
//     as Terraform's. Unlike Terraform, outputs recorded "sensitive" in
//     the state are marked sensitive (their values are the same; change
//     sets and logs print <sensitive>).
//   - A state file is read under MaxStateBytes and MaxStateNesting, so a
//     hostile file cannot exhaust the daemon; bad input is an error,
//     never a panic.
//
// This package imports engine/provider and the standard library (and
// go-cty, google/uuid) only.
package tfbuiltin
