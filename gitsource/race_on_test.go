//go:build race

package gitsource

// raceEnabled: the tests run under the race detector, which makes large copies slow.
const raceEnabled = true
