package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths and a pool trusting the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stackd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// The daemon serves its API over TLS with --tls-cert/--tls-key, requires the
// bearer token from --api-token-file, and refuses a non-loopback listen
// address without one.
func TestRunServesTLSWithToken(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t)
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret-token\n"), 0o600)
	f := newFixture(t)
	d := startDaemon(t, f.flags("--listen", "127.0.0.1:0", "--interval", "1h", "--tls-cert", certFile, "--tls-key", keyFile, "--api-token-file", tok)...)
	addr := d.addr(t)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	get := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz over TLS: %d", code)
	}
	if code := get("/v1/stack_sets", ""); code != http.StatusUnauthorized {
		t.Errorf("/v1/stack_sets without a token: %d, want 401", code)
	}
	eventually(t, 10*time.Second, func() bool { return get("/v1/stack_sets/web", "s3cret-token") == http.StatusOK },
		"/v1/stack_sets/web never answered 200 with the token")
	res := stackd(t, append([]string{"run"}, f.flags("--listen", "0.0.0.0:0")...)...)
	if res.code() == 0 || !strings.Contains(res.String(), "--api-token-file is required") {
		t.Errorf("run on a non-loopback address without a token: %s", res)
	}
}
