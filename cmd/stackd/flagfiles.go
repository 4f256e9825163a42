package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

// The files flags name: secrets (--api-token-file, --webhook-secret-file)
// and CA certificates (--api-ca-file, --custom-ca-file).

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

// readCertPool reads the PEM CA certificates in path, given with flag, into
// a pool with the system's (an empty one when the system's cannot be read).
func readCertPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flag, path)
	}
	return pool, nil
}
