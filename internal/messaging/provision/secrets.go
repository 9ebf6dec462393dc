package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// Secrets gives the password each account must have: the one its agent
// reads from its Secret.
type Secrets interface {
	// Password returns the account's password. It is called at every
	// check, so that a rotated Secret is picked up.
	Password(ctx context.Context, account string) (string, error)
}

// PasswordFileName is the file (or Secret key) that holds the password of
// an account: "xmpp-<local>_at_<domain>.password", which is also a valid
// Secret key.
func PasswordFileName(account string) string {
	return "xmpp-" + strings.ReplaceAll(account, "@", "_at_") + ".password"
}

// SecretFiles reads each account's password from a file. A Secret
// mounted as a volume is such a set of files, one per key, and the
// kubelet rewrites them when the Secret changes, so a rotation reaches the
// agent and the reconciler alike. The testbed keeps them as 0600 files.
type SecretFiles struct {
	// Files maps a bare JID to the file holding its password.
	Files map[string]string
	// Generate writes a generated password (mode 0600) for an account
	// whose file is missing or empty. For the testbed; an installation
	// creates its Secrets itself and mounts them read-only.
	Generate bool

	mu  sync.Mutex // guards Files
	gen sync.Mutex // serializes the generation of passwords
}

var _ Secrets = (*SecretFiles)(nil)

// SetFiles replaces Files, for example after the description changed.
func (s *SecretFiles) SetFiles(files map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Files = files
}

// Password implements Secrets.
func (s *SecretFiles) Password(_ context.Context, account string) (string, error) {
	s.mu.Lock()
	file, ok := s.Files[account]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no password file for %s", account)
	}
	pw, err := messaging.ReadPasswordFile(file)
	if err == nil || !s.Generate || !errors.Is(err, messaging.ErrNoPassword) {
		return pw, err
	}
	s.gen.Lock()
	defer s.gen.Unlock()
	if pw, err := messaging.ReadPasswordFile(file); !errors.Is(err, messaging.ErrNoPassword) {
		return pw, err
	}
	if pw, err = GeneratePassword(); err != nil {
		return "", err
	}
	if err := writeFileAtomic(file, []byte(pw), 0o600); err != nil {
		return "", fmt.Errorf("write the password file of %s: %w", account, err)
	}
	return pw, nil
}

// writeFileAtomic replaces file with data, so that a reader sees the old
// or the new content, never a part.
func writeFileAtomic(file string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
