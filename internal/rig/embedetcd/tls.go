package embedetcd

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long generated certificates stay valid.
const certValidity = 365 * 24 * time.Hour

// TLS names the PEM files of a certificate authority, a server certificate
// and a client certificate signed by it. NewTLS generates such a set.
type TLS struct {
	// CAFile holds the CA certificate that signs the other two.
	CAFile string
	// ServerCertFile and ServerKeyFile hold the server's certificate, valid
	// for 127.0.0.1, ::1 and localhost, and its private key.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile hold the client's certificate, with
	// common name "client", and its private key.
	ClientCertFile, ClientKeyFile string
}

// NewTLS generates a self-signed CA, a server certificate for 127.0.0.1, ::1
// and localhost, and a client certificate with common name "client", all with
// ECDSA P-256 keys and valid for a year. It writes them as PEM files into dir
// (created if missing): ca.pem, server.pem, server-key.pem, client.pem and
// client-key.pem. Private keys are readable by the owner only.
func NewTLS(dir string) (*TLS, error) {
	if dir == "" {
		return nil, errors.New("embedetcd: NewTLS: dir is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: NewTLS: creating dir %q: %w", dir, err)
	}
	t := &TLS{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: NewTLS: generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "embedetcd test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := createCert(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: NewTLS: parsing CA certificate: %w", err)
	}
	if err := writePEM(t.CAFile, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, err
	}

	leaves := []struct {
		tmpl              *x509.Certificate
		certFile, keyFile string
	}{
		{
			tmpl: &x509.Certificate{
				Subject:     pkix.Name{CommonName: "localhost"},
				IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
				DNSNames:    []string{"localhost"},
				// etcd's gRPC gateway dials the server with the server's
				// own certificate, so it must be good for client auth too.
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			},
			certFile: t.ServerCertFile,
			keyFile:  t.ServerKeyFile,
		},
		{
			tmpl: &x509.Certificate{
				Subject:     pkix.Name{CommonName: "client"},
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			},
			certFile: t.ClientCertFile,
			keyFile:  t.ClientKeyFile,
		},
	}
	for _, leaf := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("embedetcd: NewTLS: generating key: %w", err)
		}
		leaf.tmpl.NotBefore = now.Add(-time.Hour)
		leaf.tmpl.NotAfter = now.Add(certValidity)
		leaf.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := createCert(leaf.tmpl, caCert, key.Public(), caKey)
		if err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("embedetcd: NewTLS: encoding key: %w", err)
		}
		if err := writePEM(leaf.certFile, "CERTIFICATE", der, 0o644); err != nil {
			return nil, err
		}
		if err := writePEM(leaf.keyFile, "PRIVATE KEY", keyDER, 0o600); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// createCert signs tmpl with a fresh random serial number.
func createCert(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("embedetcd: NewTLS: generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: NewTLS: creating certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// writePEM writes one PEM block of the given type to path.
func writePEM(path, blockType string, der []byte, perm os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("embedetcd: NewTLS: writing %q: %w", path, err)
	}
	return nil
}

// check returns an error naming the first empty file path.
func (t *TLS) check() error {
	for _, f := range []struct{ name, path string }{
		{"CAFile", t.CAFile},
		{"ServerCertFile", t.ServerCertFile},
		{"ServerKeyFile", t.ServerKeyFile},
	} {
		if f.path == "" {
			return fmt.Errorf("embedetcd: TLS.%s is empty", f.name)
		}
	}
	return nil
}

// CertPool returns a pool holding the CA certificate, for verifying the
// server.
func (t *TLS) CertPool() (*x509.CertPool, error) {
	if t == nil {
		return nil, errors.New("embedetcd: TLS is nil")
	}
	pemData, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: reading CA file %q: %w", t.CAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("embedetcd: CA file %q holds no PEM certificate", t.CAFile)
	}
	return pool, nil
}

// ClientConfig returns a TLS configuration for clientv3.Config.TLS that
// trusts the CA and presents the client certificate.
func (t *TLS) ClientConfig() (*tls.Config, error) {
	if t == nil {
		return nil, errors.New("embedetcd: TLS is nil")
	}
	pool, err := t.CertPool()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: loading client certificate %q and key %q: %w", t.ClientCertFile, t.ClientKeyFile, err)
	}
	return &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}, nil
}
