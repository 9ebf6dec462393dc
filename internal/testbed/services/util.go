package services

import (
	"crypto/rand"
	"encoding/base64"
	"os/exec"
)

var execLookPath = exec.LookPath

// RandomSecret returns a URL-safe random string for passwords and tokens.
func RandomSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
