package testbed

import "github.com/mlsysops-go/mlsysops/internal/testbed/pki"

func pkiClient(cn string) pki.CertSpec { return pki.CertSpec{CommonName: cn, Client: true} }
