package main

import (
	"fmt"
	"os"
	"strings"
)

// readSecretFile reads the secret in path, given with flag: surrounding
// white space is dropped, and a file holding nothing else is an error,
// never "no secret" (an empty token file must not switch authentication
// off). No path: "". what says what the file must hold.
func readSecretFile(flag, path, what string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s %s is empty or only white space: it must hold %s (to go without one, omit %s)", flag, path, what, flag)
	}
	return secret, nil
}
