//go:build !linux

package bench

// fsType is "unknown": only Linux tells the filesystem type here.
func fsType(string) string { return "unknown" }
