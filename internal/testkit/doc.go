// Package testkit holds what the tests of several packages share: the git
// CLI playing a user on a real repository, and the fake clock that drives
// waits (rollout pauses, health checks, timeouts) without sleeping. It is
// imported by tests only.
package testkit
