//go:build !unix

package state

// freeSpace is unknown outside Unix: nothing is refused for lack of space.
var freeSpace func(string) (uint64, error)
