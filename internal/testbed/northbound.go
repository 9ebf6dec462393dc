package testbed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// The northbound API of the testbed: built from this checkout, run as a
// detached process, with an operator and a viewer token kept (0600) in
// <state>/pki/ and its own XMPP account.
const (
	// northboundDefaultPort is where `make up` (the default port base)
	// serves the API; other port bases use the offset portNorthbound.
	northboundDefaultPort = 8000
	portNorthbound        = 31
	northboundName        = "northbound"
	northboundBinary      = "mlsysops-northbound"
	northboundXMPPUser    = "northbound"
)

func (tb *Testbed) northboundAddr() string {
	if tb.opts.PortBase == DefaultPortBase {
		return "127.0.0.1:" + strconv.Itoa(northboundDefaultPort)
	}
	return tb.l.addr(portNorthbound)
}

// northboundPasswordFile holds the API's XMPP password.
func (tb *Testbed) northboundPasswordFile() string {
	return tb.l.path("pki", "northbound.xmpp.password")
}

func (tb *Testbed) northboundPIDFile() string { return tb.l.path("pids", northboundName+".pid") }

// northboundTokens returns the operator and viewer tokens, generated once
// per state directory, and writes the token file the server reads.
func (tb *Testbed) northboundTokens() (operator, viewer, file string, err error) {
	if operator, err = readOrCreateSecret(tb.l.path("pki", "northbound-operator.token")); err != nil {
		return "", "", "", err
	}
	if viewer, err = readOrCreateSecret(tb.l.path("pki", "northbound-viewer.token")); err != nil {
		return "", "", "", err
	}
	file = tb.l.path("pki", "northbound.tokens")
	list := auth.Format([]auth.Entry{
		{Token: operator, Identity: auth.Identity{Name: "testbed-operator", Role: api.RoleOperator}},
		{Token: viewer, Identity: auth.Identity{Name: "testbed-viewer", Role: api.RoleViewer}},
	})
	return operator, viewer, file, os.WriteFile(file, list, 0o600)
}

// northboundEnv fills the API's entries of an Env from the state folder.
func (tb *Testbed) northboundEnv(e *Env) {
	e.NorthboundURL = "http://" + tb.northboundAddr()
	if b, err := os.ReadFile(tb.l.path("pki", "northbound-operator.token")); err == nil {
		e.NorthboundToken = string(bytes.TrimSpace(b))
	}
	if b, err := os.ReadFile(tb.l.path("pki", "northbound-viewer.token")); err == nil {
		e.NorthboundViewerToken = string(bytes.TrimSpace(b))
	}
}

func (tb *Testbed) northboundProcess(tokenFile, xmppPasswordFile string) *proc.Process {
	addr := tb.northboundAddr()
	args := []string{
		"--listen=" + addr,
		"--token-file=" + tokenFile,
		"--redis-addr=" + tb.redis.Addr(),
		"--kubeconfig=" + tb.l.path("kubeconfig"),
		"--karmada-context=" + ContextKarmada,
		"--host-context=" + ContextHost,
		"--xmpp-jid=" + northboundXMPPUser + "@" + tb.ejabberd.Domain(),
		"--xmpp-password-file=" + xmppPasswordFile,
		"--xmpp-server=" + strings.Join(tb.xmppAddrs(""), ","),
		"--xmpp-ca-file=" + tb.ejabberd.CAFile(),
	}
	if c := tb.set.Continuum; c != nil {
		args = append(args, "--continuum-jid="+agentJID(LayerContinuum, c.Name, tb.ejabberd.Domain()), "--continuum-id="+c.Spec.ContinuumID)
	}
	// Policies go to the agents' policy ConfigMaps (the deployer made
	// them), which the agents' pods mount.
	// Its own Redis ACL user, as installed; the password from a file.
	args = append(args, "--redis-username="+state.ACLUserName(state.ComponentNorthbound),
		"--redis-password-file="+RedisUserPasswordFile(tb.l.path("pki"), state.ComponentNorthbound))
	return tb.process(northboundName, northboundBinary, args, httpReady("http://"+addr+api.PathReadyz))
}

// buildNorthbound builds the server (and mls) from the checkout into the
// bin folder and reports whether the server's binary changed.
func (tb *Testbed) buildNorthbound(ctx context.Context) (bool, error) {
	changed, err := tb.buildFromCheckout(ctx, northboundName, northboundBinary, "./northbound")
	if err == nil {
		// The CLI too, so that mls is on the PATH the env file sets.
		if _, merr := tb.buildFromCheckout(ctx, "mls", "mls", "./cmd/mls"); merr != nil {
			tb.progress("mls not built: %v", "mls", merr)
		}
	}
	return changed, err
}

// buildFromCheckout builds the package pkg of the checkout into the bin
// folder as binary and reports whether the binary changed. When the build
// fails but an earlier binary exists, that one is used, with a warning.
func (tb *Testbed) buildFromCheckout(ctx context.Context, name, binary, pkg string) (bool, error) {
	bin := filepath.Join(tb.opts.BinDir, binary)
	before := fileDigest(bin)
	root, err := RepoRoot()
	if err != nil {
		return false, fmt.Errorf("%s: %w; run the testbed from the checkout", name, err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, goBin, "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		if before != "" {
			tb.progress("build failed, starting the previous build: %s", name, bytes.TrimSpace(out))
			return false, nil
		}
		return false, fmt.Errorf("build %s (go build %s): %w\n%s", name, pkg, err, out)
	}
	return fileDigest(bin) != before, nil
}

func fileDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// startNorthbound builds the northbound API, provisions its XMPP account
// and tokens, and starts it unless the same build already runs and is
// ready.
func (tb *Testbed) startNorthbound(ctx context.Context) error {
	_, _, tokenFile, err := tb.northboundTokens()
	if err != nil {
		return fmt.Errorf("northbound tokens: %w", err)
	}
	pwFile := tb.northboundPasswordFile()
	pw, err := readOrCreateSecret(pwFile)
	if err != nil {
		return err
	}
	hc, err := tb.ejabberd.HTTPClient()
	if err != nil {
		return fmt.Errorf("northbound XMPP account: %w", err)
	}
	prov := provision.NewHTTPAPI(tb.ejabberd.APIURL(), tb.ejabberd.AdminJID(), tb.ejabberd.AdminPassword(), hc)
	if err := prov.EnsureAccount(ctx, northboundXMPPUser+"@"+tb.ejabberd.Domain(), pw); err != nil {
		return fmt.Errorf("northbound XMPP account: %w", err)
	}
	changed, err := tb.buildNorthbound(ctx)
	if err != nil {
		return err
	}
	p := tb.northboundProcess(tokenFile, pwFile)
	if pid, running := p.Pid(); running && (changed || !sameArgs(pid, p.Args)) {
		tb.progress("rebuilt or reconfigured: restarting", northboundName)
		if err := p.Stop(20 * time.Second); err != nil {
			return err
		}
	}
	if err := tb.startAll(ctx, []*proc.Process{p}); err != nil {
		return err
	}
	tb.progress("ready on http://%s (tokens in %s)", northboundName, tb.northboundAddr(), tb.rel(tb.l.path("pki")))
	return nil
}

// northboundPid and northboundHealthy report on the process for Status.
func (tb *Testbed) northboundPid() (int, bool) {
	return (&proc.Process{Name: northboundName, Path: filepath.Join(tb.opts.BinDir, northboundBinary), PIDFile: tb.northboundPIDFile()}).Pid()
}

func (tb *Testbed) northboundHealthy(ctx context.Context) error {
	return httpReady("http://" + tb.northboundAddr() + api.PathReadyz)(ctx)
}

// sameArgs reports whether the process pid runs with args.
func sameArgs(pid int, args []string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	got := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return len(got) == len(args)+1 && strings.Join(got[1:], "\x00") == strings.Join(args, "\x00")
}
