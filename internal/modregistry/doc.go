// Package modregistry speaks Terraform's module registry protocol and
// fetches module archives, for the module sources of templates
// (DESIGN.md §2, §7b): service discovery (/.well-known/terraform.json,
// "modules.v1"), the versions list, and the download endpoint, whose
// X-Terraform-Get header (or JSON "location") says where a version's
// package is — usually a Git address, which the caller fetches through
// gitsource, or an archive, which this package fetches.
//
// Invariants:
//   - Every request runs under a deadline and every body is bounded
//     before it is read; a registry host may be pointed at another base
//     URL (Client.Hosts: tests, mirrors), plain http only on loopback.
//   - An archive is verified against the digest it is pinned to, kept in
//     a bounded cache on disk by digest, and unpacked in memory only:
//     symbolic links, special files, entries leaving the package, too
//     many entries and more bytes than the limits (an archive bomb) are
//     refused before they are used. A cached-only fetch never goes to the
//     network.
//   - Errors name hosts and URLs without credentials.
//
// modregistry imports no package of stackd: it is a leaf.
package modregistry
