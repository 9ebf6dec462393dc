package deployer

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	mlstate "github.com/mlsysops-go/mlsysops/internal/state"
)

// Service modes.
const (
	// ModeBundled runs ejabberd, Redis and PostgreSQL in the host cluster.
	ModeBundled = "bundled"
	// ModeExternal uses services the user runs.
	ModeExternal = "external"
)

// Context names read from KUBECONFIG, as upstream's deploy.py reads them.
const (
	DefaultHostContext    = "karmada-host"
	DefaultKarmadaContext = "karmada-apiserver"
)

// FieldManager is the server-side apply field manager of every object the
// deployer writes.
const FieldManager = "mlsysops-deployer"

// Options are the deployer's settings. Flags win over the environment;
// secrets come only from files or the environment, never from flags.
type Options struct {
	// HostKubeconfig is the Karmada host cluster's kubeconfig
	// (KARMADA_HOST_KUBECONFIG). With KarmadaKubeconfig it replaces
	// Kubeconfig's contexts.
	HostKubeconfig string
	// KarmadaKubeconfig is the Karmada API's kubeconfig
	// (KARMADA_API_KUBECONFIG).
	KarmadaKubeconfig string
	// Kubeconfig holds both, as the contexts HostContext and
	// KarmadaContext (KUBECONFIG; default ~/.kube/config).
	Kubeconfig string
	// HostContext and KarmadaContext name the contexts to use; in the
	// per-cluster kubeconfigs they default to the current context.
	HostContext, KarmadaContext string
	// KarmadaAPIServer is the Karmada API's address as pods of the host
	// cluster reach it, for the kubeconfigs of the continuum agent and
	// the northbound API; default: the server of the Karmada context.
	KarmadaAPIServer string
	// KarmadaHostIP is the host cluster's address that member clusters
	// reach (KARMADA_HOST_IP): the bundled services' ports are published
	// there.
	KarmadaHostIP string

	// Descriptions is the folder with continuum/, clusters/ and nodes/.
	Descriptions string

	// Registry and Tag name the images: <registry>/mlsysops/<name>:<tag>.
	// An empty tag is the charts' appVersion.
	Registry, Tag string
	// PullPolicy of the MLSysOps images.
	PullPolicy string

	// Services is bundled or external.
	Services string
	// Propagation is how the continuum agent propagates the applications
	// it places: work or binding (the agent's --propagation); empty: the
	// charts' default, work.
	Propagation string
	// XMPPDomain is the domain of every agent's account.
	XMPPDomain string
	// XMPPServer is ejabberd's c2s address, host:port (external mode;
	// bundled: <KarmadaHostIP>:5222).
	XMPPServer string
	// XMPPCAFile is the PEM CA of ejabberd's certificate (external mode;
	// bundled: generated).
	XMPPCAFile string
	// EjabberdAPI is ejabberd's admin API URL (mod_http_api), through
	// which the agents' accounts are created (external mode).
	EjabberdAPI string
	// EjabberdAdmin is the admin account's JID (default admin@<domain>).
	EjabberdAdmin string
	// EjabberdAdminPasswordFile holds its password; else
	// $EJABBERD_ADMIN_PASSWORD (external mode).
	EjabberdAdminPasswordFile string
	// EjabberdBootstrapPasswordFile holds the one-time password the admin
	// account was created with, when your ejabberd creates it from a
	// command line (docker-compose.yaml's CTL_ON_CREATE); else
	// $EJABBERD_BOOTSTRAP_PASSWORD, else none (external mode). The
	// deployer then sets the admin password through the admin API, so
	// the password seen on that command line opens nothing. Bundled
	// services always work this way.
	EjabberdBootstrapPasswordFile string
	// rotateXMPP makes LoadMaterial generate new passwords for every
	// XMPP account (RotatePasswords) instead of keeping the stored ones.
	rotateXMPP bool
	// RedisAddress is Redis's host:port (external mode).
	RedisAddress string
	// RedisPasswordFile holds its password; else $REDIS_PASSWORD.
	RedisPasswordFile string
	// RedisUserPasswordFiles hold the passwords of the components' Redis
	// ACL users (external mode), by component (state.Components): each
	// component logs in as mlstate.ACLUserName with the rules of
	// state.ACLRules, which you define in your Redis. Bundled services
	// get generated passwords and the users defined by the deployer.
	RedisUserPasswordFiles map[string]string
	// PostgresAddress, PostgresUser and PostgresDatabase locate
	// PostgreSQL (external mode); PostgresPasswordFile holds its password,
	// else $POSTGRES_PASSWORD.
	PostgresAddress, PostgresUser, PostgresDatabase string
	PostgresPasswordFile                            string
	// S3Endpoint is the S3 server of the ML connector's files,
	// http(s)://host:port (external mode; bundled: the mlsysops-s3
	// Service). S3AccessKeyFile and S3SecretKeyFile hold its keys, else
	// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY.
	S3Endpoint, S3AccessKeyFile, S3SecretKeyFile string
	// S3Bucket is the bucket of the ML connector's files (default the
	// chart's, mlsysops-models).
	S3Bucket string
	// NorthboundTokensFile is a token list (token,name,role lines) the
	// northbound API and the ML connector accept, instead of one
	// generated operator token; the connector's own token is added.
	NorthboundTokensFile string

	// HostValues and KarmadaValues are YAML files of chart values laid
	// over the ones the deployer computes (resources, extra arguments).
	HostValues, KarmadaValues []string

	// Timeout bounds the wait for each stage's readiness.
	Timeout time.Duration
	// DryRun sends every write as a server-side dry run: nothing is
	// changed, the apiservers validate everything.
	DryRun bool
	// NoWait skips the readiness waits.
	NoWait bool
	// Purge, on uninstall, also deletes the applications, the
	// mlsysops.eu CRDs and the applications' namespace.
	Purge bool

	// env reads the environment (os.LookupEnv by default).
	env func(string) (string, bool)
}

// NewOptions returns the defaults with the environment applied.
func NewOptions() *Options {
	return NewOptionsFromEnv(os.LookupEnv)
}

// NewOptionsFromEnv is NewOptions with another environment.
func NewOptionsFromEnv(env func(string) (string, bool)) *Options {
	o := &Options{
		Descriptions:     "descriptions",
		Registry:         "docker.io",
		PullPolicy:       string(corev1.PullIfNotPresent),
		Services:         ModeBundled,
		XMPPDomain:       "mlsysops.local",
		PostgresUser:     "mlsysops",
		PostgresDatabase: "mlsysops",
		Timeout:          10 * time.Minute,
		env:              env,
	}
	get := func(k string) string { v, _ := env(k); return v }
	o.HostKubeconfig = get("KARMADA_HOST_KUBECONFIG")
	o.KarmadaKubeconfig = get("KARMADA_API_KUBECONFIG")
	o.Kubeconfig = get("KUBECONFIG")
	o.KarmadaHostIP = get("KARMADA_HOST_IP")
	return o
}

// AddFlags adds one flag per option.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HostKubeconfig, "host-kubeconfig", o.HostKubeconfig, "kubeconfig of the Karmada host cluster ($KARMADA_HOST_KUBECONFIG)")
	fs.StringVar(&o.KarmadaKubeconfig, "karmada-kubeconfig", o.KarmadaKubeconfig, "kubeconfig of the Karmada API ($KARMADA_API_KUBECONFIG)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig with both, as contexts --host-context and --karmada-context ($KUBECONFIG), used when the two above are not set")
	fs.StringVar(&o.HostContext, "host-context", o.HostContext, "context of the host cluster (default karmada-host in --kubeconfig, the current one in --host-kubeconfig)")
	fs.StringVar(&o.KarmadaContext, "karmada-context", o.KarmadaContext, "context of the Karmada API (default karmada-apiserver in --kubeconfig, the current one in --karmada-kubeconfig)")
	fs.StringVar(&o.KarmadaAPIServer, "karmada-api-server", o.KarmadaAPIServer, "the Karmada API's URL as pods of the host cluster reach it (default: the server of the Karmada context)")
	fs.StringVar(&o.KarmadaHostIP, "karmada-host-ip", o.KarmadaHostIP, "address of the host cluster's continuum node, which member clusters reach ($KARMADA_HOST_IP; bundled services)")
	fs.StringVar(&o.Descriptions, "descriptions", o.Descriptions, "system descriptions folder: continuum/, clusters/, nodes/")
	fs.StringVar(&o.Registry, "registry", o.Registry, "registry of the MLSysOps images (<registry>/mlsysops/<name>:<tag>)")
	fs.StringVar(&o.Tag, "tag", o.Tag, "tag of the MLSysOps images (default: the charts' appVersion)")
	fs.StringVar(&o.PullPolicy, "pull-policy", o.PullPolicy, "pull policy of the MLSysOps images: Always, IfNotPresent or Never")
	fs.StringVar(&o.Services, "services", o.Services, "bundled (ejabberd, Redis and PostgreSQL in the host cluster) or external (yours, see the --xmpp-*, --ejabberd-*, --redis-* and --postgres-* flags)")
	fs.StringVar(&o.XMPPDomain, "xmpp-domain", o.XMPPDomain, "XMPP domain of the agents' accounts")
	fs.StringVar(&o.XMPPServer, "xmpp-server", o.XMPPServer, "external: ejabberd's c2s address host:port, as the agents reach it; comma-separated for the nodes of an ejabberd cluster")
	fs.StringVar(&o.XMPPCAFile, "xmpp-ca-file", o.XMPPCAFile, "external: PEM CA of ejabberd's certificate (default: the system roots)")
	fs.StringVar(&o.EjabberdAPI, "ejabberd-api", o.EjabberdAPI, "external: ejabberd's admin API URL (mod_http_api), e.g. https://xmpp.example:5443/api")
	fs.StringVar(&o.EjabberdAdmin, "ejabberd-admin", o.EjabberdAdmin, "ejabberd admin account allowed to use the admin API (default admin@<xmpp-domain>)")
	fs.StringVar(&o.EjabberdAdminPasswordFile, "ejabberd-admin-password-file", o.EjabberdAdminPasswordFile, "external: file with the admin account's password (else $EJABBERD_ADMIN_PASSWORD)")
	fs.StringVar(&o.EjabberdBootstrapPasswordFile, "ejabberd-bootstrap-password-file", o.EjabberdBootstrapPasswordFile, "external: file with the one-time password your ejabberd created the admin account with from a command line (else $EJABBERD_BOOTSTRAP_PASSWORD); the deployer replaces it with the admin password")
	fs.StringVar(&o.RedisAddress, "redis-address", o.RedisAddress, "external: Redis host:port, as the agents reach it")
	fs.StringVar(&o.RedisPasswordFile, "redis-password-file", o.RedisPasswordFile, "external: file with Redis's password (else $REDIS_PASSWORD)")
	fs.StringToStringVar(&o.RedisUserPasswordFiles, "redis-user-password-file", o.RedisUserPasswordFiles, "external: COMPONENT=FILE, the password of a component's Redis ACL user mlsysops-COMPONENT, for each of "+componentList()+" (repeat the flag; docs/install.md, \"Redis users\")")
	fs.StringVar(&o.PostgresAddress, "postgres-address", o.PostgresAddress, "external: PostgreSQL host:port")
	fs.StringVar(&o.PostgresUser, "postgres-user", o.PostgresUser, "PostgreSQL user")
	fs.StringVar(&o.PostgresDatabase, "postgres-database", o.PostgresDatabase, "PostgreSQL database")
	fs.StringVar(&o.PostgresPasswordFile, "postgres-password-file", o.PostgresPasswordFile, "external: file with PostgreSQL's password (else $POSTGRES_PASSWORD)")
	fs.StringVar(&o.S3Endpoint, "s3-endpoint", o.S3Endpoint, "external: S3 endpoint of the ML connector's files, http(s)://host:port")
	fs.StringVar(&o.S3AccessKeyFile, "s3-access-key-file", o.S3AccessKeyFile, "external: file with the S3 access key (else $AWS_ACCESS_KEY_ID)")
	fs.StringVar(&o.S3SecretKeyFile, "s3-secret-key-file", o.S3SecretKeyFile, "external: file with the S3 secret key (else $AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&o.S3Bucket, "s3-bucket", o.S3Bucket, "bucket of the ML connector's files (default mlsysops-models)")
	fs.StringVar(&o.NorthboundTokensFile, "northbound-tokens-file", o.NorthboundTokensFile, "token list (token,name,viewer|operator lines) of the northbound API and the ML connector (default: one generated operator token)")
	fs.StringVar(&o.Propagation, "propagation", o.Propagation, "how the continuum agent propagates the applications it places: work (the default: it writes each cluster's Work itself, half the writes in Karmada; it may write Works, held by an admission policy to its applications') or binding (it schedules each one's Karmada ResourceBinding)")
	fs.StringArrayVar(&o.HostValues, "host-values", o.HostValues, "YAML file of mlsysops-host chart values laid over the computed ones (repeatable)")
	fs.StringArrayVar(&o.KarmadaValues, "karmada-values", o.KarmadaValues, "YAML file of mlsysops-karmada chart values laid over the computed ones (repeatable)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for each stage to be ready")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "send every write as a server-side dry run: the apiservers validate, nothing changes")
	fs.BoolVar(&o.NoWait, "no-wait", o.NoWait, "do not wait for readiness")
	fs.BoolVar(&o.Purge, "purge", o.Purge, "uninstall: also delete the applications, the mlsysops.eu CRDs and the applications' namespace")
}

// Validate lists every problem with the options for a command that
// connects to the clusters (connect) and one that installs (install).
func (o *Options) Validate(connect, install bool) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if connect && (o.HostKubeconfig == "") != (o.KarmadaKubeconfig == "") {
		add("--host-kubeconfig and --karmada-kubeconfig ($KARMADA_HOST_KUBECONFIG, $KARMADA_API_KUBECONFIG) go together; or set neither and use --kubeconfig with the contexts %s and %s", DefaultHostContext, DefaultKarmadaContext)
	}
	if o.KarmadaAPIServer != "" {
		if u, err := url.Parse(o.KarmadaAPIServer); err != nil || u.Scheme != "https" || u.Host == "" {
			add("--karmada-api-server: want an https:// URL, got %q", o.KarmadaAPIServer)
		}
	}
	if o.KarmadaHostIP != "" && net.ParseIP(o.KarmadaHostIP) == nil {
		add("--karmada-host-ip ($KARMADA_HOST_IP): %q is not an IP address", o.KarmadaHostIP)
	}
	if !install {
		return errors.Join(errs...)
	}
	if o.Descriptions == "" {
		add("--descriptions: required")
	}
	if o.Registry == "" || strings.Contains(o.Registry, "://") {
		add("--registry: want a registry host such as docker.io or registry.example:5000, got %q", o.Registry)
	}
	if strings.ContainsAny(o.Tag, ":/@ ") {
		add("--tag: %q is not an image tag", o.Tag)
	}
	switch corev1.PullPolicy(o.PullPolicy) {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		add("--pull-policy: want Always, IfNotPresent or Never, got %q", o.PullPolicy)
	}
	if o.XMPPDomain == "" || strings.ContainsAny(o.XMPPDomain, "@/ ") {
		add("--xmpp-domain: %q is not a domain", o.XMPPDomain)
	}
	hostPort := func(flag, v string) {
		if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
			add("%s: want host:port, got %q", flag, v)
		}
	}
	switch o.Services {
	case ModeBundled:
		if o.KarmadaHostIP == "" {
			add("--karmada-host-ip ($KARMADA_HOST_IP): required with bundled services: the member clusters' agents reach ejabberd and Redis there")
		}
		for flag, v := range map[string]string{"--xmpp-server": o.XMPPServer, "--redis-address": o.RedisAddress, "--postgres-address": o.PostgresAddress, "--ejabberd-api": o.EjabberdAPI, "--s3-endpoint": o.S3Endpoint} {
			if v != "" {
				add("%s: only with --services=external (bundled services have their own)", flag)
			}
		}
		if len(o.RedisUserPasswordFiles) > 0 {
			add("--redis-user-password-file: only with --services=external (the deployer makes the bundled Redis's users)")
		}
	case ModeExternal:
		for flag, v := range map[string]string{"--xmpp-server": o.XMPPServer, "--redis-address": o.RedisAddress, "--postgres-address": o.PostgresAddress} {
			if v == "" {
				add("%s: required with --services=external", flag)
			} else if flag == "--xmpp-server" {
				// The nodes of an ejabberd cluster, comma-separated: the
				// agents move to the next when theirs fails.
				for _, a := range strings.Split(v, ",") {
					hostPort(flag, strings.TrimSpace(a))
				}
			} else {
				hostPort(flag, v)
			}
		}
		if o.EjabberdAPI == "" {
			add("--ejabberd-api: required with --services=external: the agents' accounts are created through it")
		} else if u, err := url.Parse(o.EjabberdAPI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("--ejabberd-api: want an http(s):// URL, got %q", o.EjabberdAPI)
		}
		for flag, v := range map[string]struct{ file, env string }{
			"--ejabberd-admin-password-file": {o.EjabberdAdminPasswordFile, "EJABBERD_ADMIN_PASSWORD"},
			"--redis-password-file":          {o.RedisPasswordFile, "REDIS_PASSWORD"},
			"--postgres-password-file":       {o.PostgresPasswordFile, "POSTGRES_PASSWORD"},
		} {
			if _, err := o.secret(v.file, v.env); err != nil {
				add("%s: %v", flag, err)
			}
		}
		for _, c := range mlstate.Components() {
			f, ok := o.RedisUserPasswordFiles[string(c)]
			if !ok {
				add("--redis-user-password-file %s=FILE: required with --services=external: the %s logs in to Redis as its own ACL user %s", c, c, mlstate.ACLUserName(c))
				continue
			}
			if _, err := o.secret(f, ""); err != nil {
				add("--redis-user-password-file %s: %v", c, err)
			}
		}
		for c := range o.RedisUserPasswordFiles {
			if !slices.Contains(mlstate.Components(), mlstate.Component(c)) {
				add("--redis-user-password-file %s: no component of that name (want %s)", c, componentList())
			}
		}
		// Without S3 the ML connector cannot run: the chart says so
		// unless mlconnector.enabled is false.
		if o.S3Endpoint != "" {
			if u, err := url.Parse(o.S3Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				add("--s3-endpoint: want http(s)://host:port, got %q", o.S3Endpoint)
			}
			for flag, v := range map[string]struct{ file, env string }{
				"--s3-access-key-file": {o.S3AccessKeyFile, "AWS_ACCESS_KEY_ID"},
				"--s3-secret-key-file": {o.S3SecretKeyFile, "AWS_SECRET_ACCESS_KEY"},
			} {
				if _, err := o.secret(v.file, v.env); err != nil {
					add("%s: %v", flag, err)
				}
			}
		}
	default:
		add("--services: want bundled or external, got %q", o.Services)
	}
	if o.XMPPCAFile != "" {
		if _, err := os.Stat(o.XMPPCAFile); err != nil {
			add("--xmpp-ca-file: %v", err)
		}
	}
	if o.NorthboundTokensFile != "" {
		if b, err := os.ReadFile(o.NorthboundTokensFile); err != nil {
			add("--northbound-tokens-file: %v", err)
		} else if _, err := auth.Parse(b); err != nil {
			add("--northbound-tokens-file %s: %v", o.NorthboundTokensFile, err)
		}
	}
	switch o.Propagation {
	case "", "binding", "work":
	default:
		add("--propagation: want binding or work, got %q", o.Propagation)
	}
	if o.S3Bucket != "" && !validBucket(o.S3Bucket) {
		add("--s3-bucket: %q is not an S3 bucket name (3 to 63 of a-z, 0-9, '.', '-')", o.S3Bucket)
	}
	if o.Timeout <= 0 {
		add("--timeout: must be positive, got %s", o.Timeout)
	}
	for _, f := range append(append([]string(nil), o.HostValues...), o.KarmadaValues...) {
		if _, err := os.Stat(f); err != nil {
			add("values file: %v", err)
		}
	}
	return errors.Join(errs...)
}

// secret reads a secret from file, else from the environment variable;
// the error names where it looked, never the value.
func (o *Options) secret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("%s is empty", file)
	}
	if o.env != nil {
		if v, ok := o.env(env); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("give the file, or set $%s", env)
}

// hasEnv reports whether the environment variable is set and not empty.
func (o *Options) hasEnv(name string) bool {
	if o.env == nil {
		return false
	}
	v, ok := o.env(name)
	return ok && v != ""
}

// adminJID is the ejabberd admin account.
func (o *Options) adminJID() string {
	if o.EjabberdAdmin != "" {
		return o.EjabberdAdmin
	}
	return "admin@" + o.XMPPDomain
}

// validBucket reports whether name is an S3 bucket name.
func validBucket(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '.' && c != '-' || i == 0 || i == len(name)-1) {
			return false
		}
	}
	return true
}

// componentList names the components with a Redis ACL user.
func componentList() string {
	var names []string
	for _, c := range mlstate.Components() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}
