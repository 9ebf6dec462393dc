package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// The ML connector of the testbed. `make up` installs it with the rest of
// MLSysOps (the mlsysops-host chart's Deployment, on the host cluster's
// real node mls-continuum; its database "mlsysops" on the testbed's
// PostgreSQL and its files in the testbed's S3 server, versitygw, both on
// the bridge address where its pod reaches them), served on its NodePort.
// Test binaries, which install nothing, and --kwok-only run it instead as
// a detached process built from this checkout, with a database and a
// bucket of its own. Either way it takes the northbound API's tokens, and
// its secrets (the database URL, the S3 keys, the northbound token) are
// files under <state>/pki or Secrets, never arguments.
const (
	// mlconnectorDefaultPort is where `make up` (the default port base)
	// serves the connector, upstream's port; other port bases use the
	// offset portMLConnector.
	mlconnectorDefaultPort = 8090
	mlconnectorName        = "mlconnector"
	mlconnectorBinary      = "mlsysops-mlconnector"
	mlconnectorDatabase    = "mlconnector"
	// S3Bucket holds the process connector's artifacts.
	S3Bucket = "mlsysops-models"
	// InstalledS3Bucket holds the installed connector's (never the
	// process's: each sweeps the objects its database does not know).
	InstalledS3Bucket = "mlsysops-installed-models"
	// installedDatabase is the installed connector's database and role;
	// its password is <state>/pki/mlsysops-db.password.
	installedDatabase = "mlsysops"
	// MLConnectorNodePort is the installed connector's NodePort (the
	// chart's default).
	MLConnectorNodePort = 30890
	// modelServerImage is the catalog's image deployments serve models
	// with (ONNX Runtime inside); the real nodes have it imported.
	modelServerImage = "modelserver"
)

// mlconnectorAddr is where the connector serves: the host's address on
// the testbed bridge, which pods on the real nodes reach (their init
// containers download the models' files from it) as well as this host.
func (tb *Testbed) mlconnectorAddr() string {
	port := tb.l.port(portMLConnector)
	if tb.opts.PortBase == DefaultPortBase {
		port = mlconnectorDefaultPort
	}
	return net.JoinHostPort(tb.net.HostIP(), strconv.Itoa(port))
}

// modelServerRef is the model server image's reference: the one the
// testbed built and imported into the real nodes (imgs), or, without
// real nodes, the one in bin/images, or the catalog's name at version
// dev (which runs nowhere: its pods stay on simulated nodes).
func (tb *Testbed) modelServerRef(imgs *builtImages) (string, error) {
	var m *images.Manifest
	if imgs != nil {
		var err error
		if m, _, err = imgs.wait(); err != nil {
			return "", err
		}
	} else if loaded, err := images.LoadManifest(tb.imagesDir()); err == nil {
		m = loaded
	}
	if m != nil {
		if ref := m.Ref(modelServerImage); ref != "" {
			return ref, nil
		}
	}
	im, err := images.Lookup(modelServerImage)
	if err != nil {
		return "", err
	}
	return im[0].Ref("", "dev"), nil
}

func (tb *Testbed) mlconnectorPIDFile() string { return tb.l.path("pids", mlconnectorName+".pid") }

// s3 describes the testbed's S3 server; its root keys are generated once
// per state folder and kept in <state>/pki/s3 (access-key, secret-key),
// the folder the connector reads them from.
func (tb *Testbed) s3() (*services.S3, error) {
	access, err := readOrCreateSecret(tb.l.path("pki", "s3", "access-key"))
	if err != nil {
		return nil, err
	}
	secret, err := readOrCreateSecret(tb.l.path("pki", "s3", "secret-key"))
	if err != nil {
		return nil, err
	}
	// On the bridge: the installed connector's pod reaches it there.
	return services.NewS3(filepath.Join(tb.opts.BinDir, "versitygw"), tb.l.path("s3"), tb.net.HostIP(), tb.l.port(portS3), access, secret), nil
}

// installsMLSysOps says whether Up installs MLSysOps with the deployer,
// the ML connector included (see installMLSysOps): only where a real node
// can run its pods. The scale profile, without real nodes, runs the
// agents and the connector as processes.
func (tb *Testbed) installsMLSysOps() bool {
	return !tb.opts.SkipAgents && !testing.Testing() && !tb.opts.KWOKOnly && tb.settings().realNodes
}

// continuumNodeIP is the address of the host cluster's real node, where
// the installed connector's NodePort is served.
func (tb *Testbed) continuumNodeIP() string {
	for _, n := range tb.real {
		if n.context == ContextHost {
			return tb.net.NodeIP(n.index)
		}
	}
	return ""
}

// installedDBPasswordFile holds the password of the installed
// connector's database role.
func (tb *Testbed) installedDBPasswordFile() string { return tb.l.path("pki", "mlsysops-db.password") }

// startMLConnector prepares the connector's services: on the testbed's
// PostgreSQL (started with ejabberd's) the installed connector's database
// and role, and the process connector's; the S3 server. Then, unless Up
// installs MLSysOps (the connector with it), it builds the connector and
// starts it as a process unless the same build already runs with the
// same configuration and is ready; when Up installs, a process left by an
// earlier run is stopped.
func (tb *Testbed) startMLConnector(ctx context.Context, imgs *builtImages) error {
	pg, err := tb.newPostgres()
	if err != nil {
		return err
	}
	ipw, err := readOrCreateSecret(tb.installedDBPasswordFile())
	if err != nil {
		return err
	}
	if err := pg.EnsureDatabase(ctx, installedDatabase, installedDatabase, ipw); err != nil {
		return err
	}
	pw, err := readOrCreateSecret(tb.l.path("pki", "mlconnector-db.password"))
	if err != nil {
		return err
	}
	if err := pg.EnsureDatabase(ctx, mlconnectorDatabase, mlconnectorDatabase, pw); err != nil {
		return err
	}
	dsnFile := tb.l.path("pki", "mlconnector-db.url")
	if err := os.WriteFile(dsnFile, []byte(pg.DSN(mlconnectorDatabase, pw, mlconnectorDatabase)), 0o600); err != nil {
		return err
	}
	s3, err := tb.s3()
	if err != nil {
		return err
	}
	if err := s3.Start(ctx); err != nil {
		return fmt.Errorf("%w; see %s", err, s3.LogFile())
	}
	tb.progress("ready on %s", "s3", s3.URL())
	if tb.installsMLSysOps() {
		p := &proc.Process{Name: mlconnectorName, PIDFile: tb.mlconnectorPIDFile()}
		if _, running := p.Pid(); running {
			if err := p.Stop(20 * time.Second); err != nil {
				return err
			}
			tb.progress("process stopped: the installer runs the connector now", mlconnectorName)
		}
		return nil
	}
	changed, err := tb.buildFromCheckout(ctx, mlconnectorName, mlconnectorBinary, "./mlconnector")
	if err != nil {
		return err
	}
	_, _, tokenFile, err := tb.northboundTokens()
	if err != nil {
		return err
	}
	image, err := tb.modelServerRef(imgs)
	if err != nil {
		return fmt.Errorf("model server image: %w", err)
	}
	addr := tb.mlconnectorAddr()
	args := []string{
		"--listen=" + addr,
		"--token-file=" + tokenFile,
		"--database-url-file=" + dsnFile,
		"--artifact-store=s3",
		"--s3-endpoint=" + s3.URL(),
		"--s3-bucket=" + S3Bucket,
		"--s3-credentials-dir=" + tb.l.path("pki", "s3"),
		"--northbound-url=http://" + tb.northboundAddr(),
		"--northbound-token-file=" + tb.l.path("pki", "northbound-operator.token"),
		"--model-server-image=" + image,
		// The connector reaches model servers at their pods' addresses
		// (the real nodes' pod subnets are routed from this host).
		"--access=pod",
		"--download-url=http://" + addr,
		"--upload-dir=" + tb.l.path("mlconnector-uploads"),
		"--drift-interval=1h",
	}
	if err := os.MkdirAll(tb.l.path("mlconnector-uploads"), 0o700); err != nil {
		return err
	}
	p := tb.process(mlconnectorName, mlconnectorBinary, args, httpReady("http://"+addr+"/readyz"))
	if pid, running := p.Pid(); running && (changed || !sameArgs(pid, p.Args)) {
		tb.progress("rebuilt or reconfigured: restarting", mlconnectorName)
		if err := p.Stop(20 * time.Second); err != nil {
			return err
		}
	}
	if err := tb.startAll(ctx, []*proc.Process{p}); err != nil {
		return err
	}
	tb.progress("ready on http://%s", mlconnectorName, addr)
	return nil
}

// stopS3 stops the S3 server (the connector itself stops with every
// process of the pids folder, PostgreSQL with ejabberd's data).
func (tb *Testbed) stopS3(ctx context.Context) error {
	s3, err := tb.s3()
	if err != nil {
		return err
	}
	if err := s3.Stop(ctx); err != nil {
		return fmt.Errorf("stop the S3 server: %w", err)
	}
	return nil
}

// mlconnectorEnv fills the connector's entries of an Env: the installed
// connector's NodePort when Up installs it, else the process's address.
func (tb *Testbed) mlconnectorEnv(e *Env) {
	e.MLConnectorURL = "http://" + tb.mlconnectorAddr()
	if ip := tb.continuumNodeIP(); tb.installsMLSysOps() && ip != "" {
		e.MLConnectorURL = "http://" + net.JoinHostPort(ip, strconv.Itoa(MLConnectorNodePort))
	}
	if s3, err := tb.s3(); err == nil {
		e.S3URL = s3.URL()
		e.Agents.S3URL = s3.URL()
		e.Agents.S3AccessKeyFile, e.Agents.S3SecretKeyFile = tb.l.path("pki", "s3", "access-key"), tb.l.path("pki", "s3", "secret-key")
	}
	if pg, err := tb.newPostgres(); err == nil {
		e.PostgresAddr = pg.Addr()
		e.Agents.PostgresAddr = pg.AddrOn(tb.net.HostIP())
	}
	e.Agents.PostgresDatabase, e.Agents.PostgresPasswordFile = installedDatabase, tb.installedDBPasswordFile()
	e.Agents.ContinuumNodeIP = tb.continuumNodeIP()
	e.Agents.NorthboundTokensFile = tb.l.path("pki", "northbound.tokens")
}

func (tb *Testbed) mlconnectorPid() (int, bool) {
	return (&proc.Process{Name: mlconnectorName, Path: filepath.Join(tb.opts.BinDir, mlconnectorBinary), PIDFile: tb.mlconnectorPIDFile()}).Pid()
}

func (tb *Testbed) mlconnectorHealthy(ctx context.Context) error {
	return httpReady("http://" + tb.mlconnectorAddr() + "/readyz")(ctx)
}

// BuildMLConnector builds the ML connector from the checkout at root into
// out, with the race detector when race is set (a process that races
// prints a report and exits with status 66).
func BuildMLConnector(ctx context.Context, root, out string, race bool) error {
	args := []string{"-o", out, "./mlconnector"}
	if race {
		args = append([]string{"-race"}, args...)
	}
	return goBuild(ctx, root, nil, args...)
}
