package deployer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	mlstate "github.com/mlsysops-go/mlsysops/internal/state"
)

// The description folders and the ConfigMaps made of them.
var descriptionConfigMaps = []struct{ Folder, ConfigMap string }{
	{"continuum", "continuum-system-description"},
	{"clusters", "cluster-system-description"},
	{"nodes", "node-system-descriptions"},
}

// Plan is what an installation consists of, worked out from the options
// and the descriptions before anything is written.
type Plan struct {
	Set *description.Set
	// Files are the description ConfigMaps' data by folder (continuum,
	// clusters, nodes): file name -> content.
	Files map[string]map[string]string
	// Continuum is the continuum agent's name and ContinuumID its id.
	Continuum, ContinuumID string
	// Clusters maps each described cluster to the nodes it lists.
	Clusters map[string][]string
	// Accounts are the XMPP accounts of every agent and the API.
	Accounts []Account
}

// Account is one XMPP account and where its password is kept.
type Account struct {
	// JID is the bare JID.
	JID string
	// Parent is the parent agent's JID, linked in both rosters; empty for
	// the continuum and the API.
	Parent string
	// Cluster is "host" or "karmada": where the Secret lives.
	Cluster string
	// Secret and Key locate the password.
	Secret, Key string
}

// Names of the Secrets the deployer writes.
const (
	// SecretRedis holds the bundled Redis's default user's password,
	// which no component uses; SecretRedisACL its ACL users (users.acl,
	// lines with the passwords' digests). Each component's own user and
	// password are in RedisUserSecret.
	SecretRedis         = "mlsysops-redis"
	SecretRedisACL      = "mlsysops-redis-acl"
	SecretPostgres      = "mlsysops-postgres"
	SecretEjabberdAdmin = "mlsysops-ejabberd-admin"
	// SecretEjabberdBootstrap holds the bundled ejabberd's one-time admin
	// password (Material.EjabberdBootstrapPassword): ejabberd's pod gets
	// this one, never the admin password.
	SecretEjabberdBootstrap = "mlsysops-ejabberd-bootstrap"
	SecretEjabberdTLS       = "mlsysops-ejabberd-tls"
	// SecretEjabberdSQL is the client certificate and key the bundled
	// ejabberd logs in to the bundled PostgreSQL with (tls.crt, tls.key,
	// both in client.pem), as role EjabberdSQLRole, which has no
	// password; ca.crt verifies the server. SecretPostgresTLS is
	// PostgreSQL's server certificate and key, and the CA of the client
	// certificates it accepts.
	SecretEjabberdSQL     = "mlsysops-ejabberd-sql"
	SecretPostgresTLS     = "mlsysops-postgres-tls"
	SecretXMPPCA          = "mlsysops-xmpp-ca"
	SecretContinuumXMPP   = "mlsysops-continuum-agent"
	SecretNorthboundXMPP  = "mlsysops-northbound-xmpp"
	SecretNorthboundToken = "mlsysops-northbound-tokens"
	// SecretS3 holds the S3 keys (access-key, secret-key): the bundled
	// S3 server's root keys, or yours in external mode; the ML connector
	// reads them.
	SecretS3 = "mlsysops-s3"
	// SecretMLConnectorDB holds the ML connector's PostgreSQL URL with its
	// password (url).
	SecretMLConnectorDB = "mlsysops-mlconnector-db"
	// SecretMLConnectorToken holds the operator token the ML connector
	// calls the northbound API with (token); the token is in the API's
	// list as MLConnectorIdentity.
	SecretMLConnectorToken = "mlsysops-mlconnector-northbound"
	SecretKarmadaForCont   = "mlsysops-karmada-continuum"
	SecretKarmadaForNB     = "mlsysops-karmada-northbound"
	// SecretKarmadaForAccounts is the accounts reconciler's kubeconfig of
	// the Karmada API.
	SecretKarmadaForAccounts = "mlsysops-karmada-accounts"
	// SecretAccountsPasswords holds every account's password, for the
	// accounts reconciler (one key per account, AgentSecretKey).
	SecretAccountsPasswords = "mlsysops-accounts-passwords"
	// SecretAgentsPrefix + <cluster> holds the passwords of that cluster's
	// agents, one key per agent (AgentSecretKey).
	SecretAgentsPrefix = "mlsysops-agents-"
	// AgentHTTPTokenKey holds Material.AgentHTTPToken in the agents'
	// Secrets.
	AgentHTTPTokenKey = "agent-http.token"
	// Namespace holds every object of the installation but the
	// applications.
	Namespace = "mlsysops-framework"
	// AppNamespace holds the applications.
	AppNamespace = "mlsysops"
)

// NorthboundLocal is the northbound API's account name.
const NorthboundLocal = "northbound"

// AgentSecretKey is the Secret key of an account's password,
// "xmpp-<local>_at_<domain>.password": a valid key and file name, the same
// scheme as the testbed's password files. The DaemonSets mount exactly the
// key of the agent's own node (subPathExpr).
func AgentSecretKey(jid string) string { return provision.PasswordFileName(jid) }

// AgentJID is the agents' own JID scheme (agents/agent.AgentJID): nodes
// use their host name, cluster and continuum agents add their layer.
func AgentJID(layer, name, domain string) string {
	switch layer {
	case "cluster":
		return name + ".cluster@" + domain
	case "continuum":
		return name + ".continuum@" + domain
	}
	return name + "@" + domain
}

// NewPlan loads and checks the descriptions (every problem with its file
// and field path) and works out the installation.
func NewPlan(o *Options) (*Plan, error) {
	set, err := description.LoadDir(o.Descriptions)
	if err != nil {
		return nil, fmt.Errorf("descriptions: %w", err)
	}
	var problems []string
	if set.Continuum == nil {
		problems = append(problems, filepath.Join(o.Descriptions, "continuum")+": no continuum description (want continuum/<host name of the continuum node>.yaml)")
	}
	if len(set.Clusters) == 0 {
		problems = append(problems, filepath.Join(o.Descriptions, "clusters")+": no cluster description")
	}
	p := &Plan{Set: set, Files: map[string]map[string]string{}, Clusters: map[string][]string{}}
	for _, f := range descriptionConfigMaps {
		files, err := ConfigMapFiles(filepath.Join(o.Descriptions, f.Folder))
		if err != nil {
			problems = append(problems, err.Error())
		}
		p.Files[f.Folder] = files
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("descriptions:\n  %s", strings.Join(problems, "\n  "))
	}
	p.Continuum, p.ContinuumID = set.Continuum.Name, set.Continuum.Spec.ContinuumID
	domain := o.XMPPDomain
	cont := AgentJID("continuum", p.Continuum, domain)
	p.Accounts = append(p.Accounts,
		Account{JID: cont, Cluster: "host", Secret: SecretContinuumXMPP, Key: AgentSecretKey(cont)},
		Account{JID: NorthboundLocal + "@" + domain, Cluster: "host", Secret: SecretNorthboundXMPP, Key: AgentSecretKey(NorthboundLocal + "@" + domain)})
	for _, c := range set.Clusters {
		p.Clusters[c.Name] = append([]string(nil), c.Spec.Nodes...)
		cj := AgentJID("cluster", c.Name, domain)
		secret := SecretAgentsPrefix + c.Name
		p.Accounts = append(p.Accounts, Account{JID: cj, Parent: cont, Cluster: "karmada", Secret: secret, Key: AgentSecretKey(cj)})
		for _, n := range c.Spec.Nodes {
			nj := AgentJID("node", n, domain)
			p.Accounts = append(p.Accounts, Account{JID: nj, Parent: cj, Cluster: "karmada", Secret: secret, Key: AgentSecretKey(nj)})
		}
	}
	return p, nil
}

// ConfigMapFiles reads a folder as `kubectl create configmap NAME
// --from-file=DIR` does: every regular file (not links, not folders), keyed
// by its name. A missing folder gives no files. Names that are not valid
// ConfigMap keys, and files that are not UTF-8 text, are errors.
func ConfigMapFiles(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var problems []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if errs := validation.IsConfigMapKey(e.Name()); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s: the file name is not a valid ConfigMap key: %s", p, strings.Join(errs, "; ")))
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if !utf8.Valid(b) {
			problems = append(problems, p+": not UTF-8 text")
			continue
		}
		out[e.Name()] = string(b)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n  "))
	}
	return out, nil
}

// Material is the secret and generated data an installation needs before
// it renders: read back from its Secrets when they exist, else generated
// or taken from the options (external services).
type Material struct {
	RedisPassword, PostgresPassword, EjabberdAdminPassword string
	// EjabberdBootstrapPassword is the one-time password the admin
	// account is created with from a command line (the bundled
	// ejabberd's CTL_ON_CREATE), replaced at once through the admin API
	// by EjabberdAdminPassword (provision.HTTPAPI.Bootstrap); "" when
	// the admin account needs none (external services without one).
	EjabberdBootstrapPassword string
	// RedisUsers are the passwords of the components' Redis ACL users,
	// by component.
	RedisUsers map[mlstate.Component]string
	// RedisACL defines those users in the bundled Redis (ACL file
	// lines, with the passwords' SHA-256 digests).
	RedisACL []byte
	// Passwords of the XMPP accounts, by JID.
	Passwords map[string]string
	// AgentHTTPToken is the bearer token of the agents' /status, /ping
	// and profiles (--http-token-file), under AgentHTTPTokenKey in the
	// continuum agent's Secret and in each cluster's agents' Secret.
	AgentHTTPToken string
	// Recorded are the XMPP accounts the installation made before this
	// run (the keys of SecretAccountsPasswords): those no longer
	// described are deleted from ejabberd.
	Recorded []string
	// NorthboundTokens is the API's token list; OperatorToken is the
	// operator token in it, MLConnectorToken the ML connector's.
	NorthboundTokens []byte
	OperatorToken    string
	MLConnectorToken string
	// S3AccessKey and S3SecretKey are the S3 keys of the ML connector's
	// files (bundled: the S3 server's root keys).
	S3AccessKey, S3SecretKey string
	// CABundle is the PEM CA of ejabberd's certificate ("" for the
	// system roots); CAKey, ServerCert and ServerKey are the bundled
	// server's.
	CABundle, CAKey, ServerCert, ServerKey []byte
	// PostgresServerCert and PostgresServerKey are the bundled
	// PostgreSQL's; EjabberdSQLCert and EjabberdSQLKey the client
	// certificate the bundled ejabberd logs in to it with. The same CA
	// signs them.
	PostgresServerCert, PostgresServerKey, EjabberdSQLCert, EjabberdSQLKey []byte
}

// EjabberdSQLRole is the bundled ejabberd's PostgreSQL role: it owns the
// database ejabberd and logs in with a client certificate only. A
// password would be printed where ejabberd's SQL process dumps its state:
// in the crash report Erlang logs when PostgreSQL goes away.
const EjabberdSQLRole = "ejabberd"

// BundledPostgresHost is the bundled PostgreSQL's in-cluster name.
const BundledPostgresHost = "mlsysops-postgres." + Namespace + ".svc"

// Values returns the chart values of both charts.
func (p *Plan) Values(o *Options, m *Material) (host, karmada map[string]any, err error) {
	img := map[string]any{"registry": o.Registry, "tag": o.Tag, "pullPolicy": o.PullPolicy}
	xmppServer, redisAddr, pgAddr := o.XMPPServer, o.RedisAddress, o.PostgresAddress
	if o.Services == ModeBundled {
		xmppServer = joinHostPort(o.KarmadaHostIP, "5222")
		redisAddr = joinHostPort(o.KarmadaHostIP, "6379")
	}
	clusters := map[string]any{}
	for c, nodes := range p.Clusters {
		list := make([]any, len(nodes))
		for i, n := range nodes {
			list[i] = n
		}
		clusters[c] = list
	}
	ca := string(m.CABundle)
	host = map[string]any{
		"image":         img,
		"karmadaHostIP": o.KarmadaHostIP,
		"services":      map[string]any{"mode": o.Services},
		"xmpp":          map[string]any{"domain": o.XMPPDomain, "server": xmppServer, "caBundle": ca, "adminJID": o.adminJID()},
		"redis":         map[string]any{"address": redisAddr},
		"postgres":      map[string]any{"address": pgAddr, "database": o.PostgresDatabase, "user": o.PostgresUser},
		"mlconnector":   map[string]any{"s3": map[string]any{"endpoint": o.S3Endpoint}},
		"continuum":     map[string]any{"name": p.Continuum, "id": p.ContinuumID},
		"descriptions": map[string]any{"continuum": anyMap(p.Files["continuum"]),
			"clusters": anyMap(p.Files["clusters"]), "nodes": anyMap(p.Files["nodes"])},
	}
	if o.Services == ModeExternal {
		host["xmpp"].(map[string]any)["adminAPI"] = o.EjabberdAPI
	}
	if o.Propagation != "" {
		host["continuumAgent"] = map[string]any{"propagation": o.Propagation}
	}
	if o.S3Bucket != "" {
		host["mlconnector"].(map[string]any)["s3"].(map[string]any)["bucket"] = o.S3Bucket
	}
	karmada = map[string]any{
		"image":         img,
		"xmpp":          map[string]any{"domain": o.XMPPDomain, "server": xmppServer, "caBundle": ca, "controllers": []any{NorthboundLocal + "@" + o.XMPPDomain}},
		"redis":         map[string]any{"address": redisAddr},
		"continuumName": p.Continuum,
		"clusters":      clusters,
		"descriptions":  map[string]any{"clusters": anyMap(p.Files["clusters"]), "nodes": anyMap(p.Files["nodes"])},
	}
	if o.Propagation != "" {
		karmada["propagation"] = o.Propagation
	}
	if host, err = overlay(host, o.HostValues); err != nil {
		return nil, nil, err
	}
	if karmada, err = overlay(karmada, o.KarmadaValues); err != nil {
		return nil, nil, err
	}
	return host, karmada, nil
}

// overlay lays the values files over the computed values: theirs win.
func overlay(computed map[string]any, files []string) (map[string]any, error) {
	out := computed
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		out = chartutil.CoalesceTables(v.AsMap(), out)
	}
	return out, nil
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// clusterNames returns the described clusters, sorted.
func (p *Plan) clusterNames() []string {
	out := make([]string, 0, len(p.Clusters))
	for c := range p.Clusters {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// RedisUserSecret is the Secret with component c's Redis ACL user name
// and password (keys username and password), and the API it is in:
// "karmada" for the cluster agents' (propagated to every member), "host"
// for the others.
func RedisUserSecret(c mlstate.Component) (name, cluster string) {
	name = "mlsysops-redis-" + string(c)
	if c == mlstate.ComponentCluster {
		return name, "karmada"
	}
	return name, "host"
}
