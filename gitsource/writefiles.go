package gitsource

import "context"

// WriteFiles is WriteStatus with plain arguments, so that consumers can
// declare the method in their own small interface without importing
// gitsource (the reconciler's StatusWriter).
func (s *Source) WriteFiles(ctx context.Context, message string, files map[string][]byte, deletes []string) (string, error) {
	return s.WriteStatus(ctx, StatusWrite{Files: files, Delete: deletes, Message: message})
}
