// Package pki creates and reloads the certificate authorities, certificates
// and keys that the testbed's components use to talk to each other over TLS.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// CA is a certificate authority whose certificate and key live as PEM files
// in a directory, so that a later run loads the same authority instead of
// minting a new one that running components would not trust.
type CA struct {
	// CertFile is the PEM file of the CA certificate.
	CertFile string
	cert     *x509.Certificate
	key      crypto.Signer
}

// LoadOrCreateCA loads the CA stored as <dir>/<name>.crt and <name>.key, or
// creates and stores a new one with the given common name.
func LoadOrCreateCA(dir, name, commonName string) (*CA, error) {
	certFile := filepath.Join(dir, name+".crt")
	keyFile := filepath.Join(dir, name+".key")
	if cert, key, err := loadPair(certFile, keyFile); err == nil {
		return &CA{CertFile: certFile, cert: cert, key: key}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load CA %s: %w", name, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"mlsysops-testbed"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA %s: %w", name, err)
	}
	cert, _ := x509.ParseCertificate(der)
	if err := writePair(certFile, keyFile, der, key); err != nil {
		return nil, err
	}
	return &CA{CertFile: certFile, cert: cert, key: key}, nil
}

// CertSpec describes a leaf certificate.
type CertSpec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// Issue returns <dir>/<name>.crt and <name>.key signed by the CA, creating
// them when they are missing or were signed by another CA.
func (ca *CA) Issue(dir, name string, spec CertSpec) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if cert, _, err := loadPair(certFile, keyFile); err == nil && cert.CheckSignatureFrom(ca.cert) == nil {
		return certFile, keyFile, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return "", "", fmt.Errorf("issue certificate %s: %w", name, err)
	}
	return certFile, keyFile, writePair(certFile, keyFile, der, key)
}

// EnsureRSAKey writes an RSA private key (PKCS#1) and its public key to
// <dir>/<name>.key and <name>.pub if they do not exist. Kubernetes service
// account token signing needs RSA or ECDSA; RSA is what every tool expects.
func EnsureRSAKey(dir, name string) (keyFile, pubFile string, err error) {
	keyFile = filepath.Join(dir, name+".key")
	pubFile = filepath.Join(dir, name+".pub")
	if _, err := os.Stat(keyFile); err == nil {
		if _, err := os.Stat(pubFile); err == nil {
			return keyFile, pubFile, nil
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func loadPair(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// Covers reports whether the PEM certificate in certFile names every DNS
// name and IP of spec: false when it does not, or cannot be read, so that
// a caller issues a new one.
func Covers(certFile string, spec CertSpec) bool {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return false
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return false
	}
	for _, n := range spec.DNSNames {
		if c.VerifyHostname(n) != nil {
			return false
		}
	}
	for _, ip := range spec.IPs {
		if c.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}
