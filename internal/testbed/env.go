package testbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// Env is what clients need to use a running testbed. Up writes it to
// <state>/testbed.json and, as shell exports, to <state>/env.
type Env struct {
	StateDir   string   `json:"stateDir"`
	Kubeconfig string   `json:"kubeconfig"`
	Clusters   []string `json:"clusters"`
	Nodes      []string `json:"nodes"`

	RedisAddr     string `json:"redisAddr"`
	RedisPassword string `json:"redisPassword"`

	// XMPPAddr is the first ejabberd node's c2s address; XMPPAddrs every
	// node's (one unless Options.XMPPNodes asked for a cluster).
	XMPPAddr     string   `json:"xmppAddr"`
	XMPPAddrs    []string `json:"xmppAddrs"`
	XMPPDomain   string   `json:"xmppDomain"`
	XMPPCAFile   string   `json:"xmppCAFile"`
	XMPPAdminURL string   `json:"xmppAdminURL"`
	// XMPPAdminURLs are every ejabberd node's admin API.
	XMPPAdminURLs     []string `json:"xmppAdminURLs"`
	XMPPAdminJID      string   `json:"xmppAdminJID"`
	XMPPAdminPassword string   `json:"xmppAdminPassword"`

	// The northbound API and its operator and viewer tokens.
	NorthboundURL         string `json:"northboundURL"`
	NorthboundToken       string `json:"northboundToken"`
	NorthboundViewerToken string `json:"northboundViewerToken"`

	// The ML connector (it takes the northbound API's tokens), and the
	// PostgreSQL and S3 servers it keeps its data in.
	MLConnectorURL string `json:"mlconnectorURL"`
	PostgresAddr   string `json:"postgresAddr"`
	S3URL          string `json:"s3URL"`

	// Karmada's controller manager and scheduler: their Prometheus
	// metrics and Go profiles (/debug/pprof/), on loopback, for the
	// benchmarks to read where a burst's time goes.
	KarmadaControllers KarmadaProcessEnv `json:"karmadaControllers"`
	KarmadaScheduler   KarmadaProcessEnv `json:"karmadaScheduler"`

	// Network is the testbed's address plan (see netPlan).
	Network NetworkEnv `json:"network"`
	// RealNodes are the nodes with containerd and a kubelet.
	RealNodes []RealNodeEnv `json:"realNodes"`

	// Agents say where the installed agents' pods reach the services and
	// the Karmada API (InstallOptions).
	Agents AgentsEnv `json:"agents"`
}

// KarmadaProcessEnv locates a Karmada process's debugging endpoints.
type KarmadaProcessEnv struct {
	MetricsURL string `json:"metricsURL"`
	PprofURL   string `json:"pprofURL"`
}

// AgentsEnv is what an installation of MLSysOps on the testbed needs
// beyond the rest of Env.
type AgentsEnv struct {
	// XMPPAddr and RedisAddr are ejabberd's c2s and Redis on the bridge;
	// XMPPAddrs every ejabberd node's c2s there.
	XMPPAddr  string   `json:"xmppAddr"`
	XMPPAddrs []string `json:"xmppAddrs"`
	RedisAddr string   `json:"redisAddr"`
	// XMPPAdminURL is ejabberd's admin API on the bridge, where the
	// accounts reconciler's pod reaches it.
	XMPPAdminURL string `json:"xmppAdminURL"`
	// PostgresAddr is the testbed's PostgreSQL on the bridge, where the
	// installed ML connector's pod reaches it; PostgresDatabase is that
	// connector's database and role, PostgresPasswordFile its password.
	PostgresAddr         string `json:"postgresAddr"`
	PostgresDatabase     string `json:"postgresDatabase"`
	PostgresPasswordFile string `json:"postgresPasswordFile"`
	// S3URL is the testbed's S3 server on the bridge, S3AccessKeyFile and
	// S3SecretKeyFile its keys.
	S3URL           string `json:"s3URL"`
	S3AccessKeyFile string `json:"s3AccessKeyFile"`
	S3SecretKeyFile string `json:"s3SecretKeyFile"`
	// ContinuumNodeIP is the host cluster's real node, where the installed
	// ML connector's NodePort is served to the members' pods.
	ContinuumNodeIP string `json:"continuumNodeIP"`
	// NorthboundTokensFile is the testbed's token list (MLS_TOKEN,
	// MLS_VIEWER_TOKEN): the installed API and connector take it too.
	NorthboundTokensFile string `json:"northboundTokensFile"`
	// KarmadaAPIServer is the Karmada API on the bridge.
	KarmadaAPIServer string `json:"karmadaAPIServer"`
	// AdminPasswordFile and RedisPasswordFile hold those passwords.
	AdminPasswordFile string `json:"adminPasswordFile"`
	RedisPasswordFile string `json:"redisPasswordFile"`
	// Descriptions is the testbed's descriptions folder.
	Descriptions string `json:"descriptions"`
	// KwokletState is the kwoklets' folder (<state>/kwoklet/<cluster>).
	KwokletState string `json:"kwokletState"`
	// KwokletNodes are the KWOK nodes' namespaces and addresses.
	KwokletNodes []kwokletNode `json:"kwokletNodes"`
}

// NetworkEnv describes the testbed's addresses.
type NetworkEnv struct {
	// Range is the testbed's whole range, blackholed on the host.
	Range string `json:"range"`
	// Ranges are the ranges in it by use (services, pod subnets, KWOK's
	// node and pod addresses, ...).
	Ranges map[string]string `json:"ranges"`
	// HostIP is the host's address on the bridge, where the apiservers
	// listen.
	HostIP string `json:"hostIP"`
	// Bridge is the host bridge of the real nodes.
	Bridge string `json:"bridge"`
	// ServiceCIDR is every apiserver's Service range;
	// KubernetesServiceIP the kubernetes Service's ClusterIP.
	ServiceCIDR         string `json:"serviceCIDR"`
	KubernetesServiceIP string `json:"kubernetesServiceIP"`
	// CgroupRoot is the testbed's cgroup tree (below every hierarchy).
	CgroupRoot string `json:"cgroupRoot"`
}

// RealNodeEnv is one real node.
type RealNodeEnv struct {
	Name string `json:"name"`
	// Context is its cluster's kubeconfig context.
	Context string `json:"context"`
	IP      string `json:"ip"`
	// PodSubnet is the range its pods get addresses from.
	PodSubnet string `json:"podSubnet"`
	// NetNS is its network namespace file.
	NetNS string `json:"netns"`
	// Containerd is its containerd socket; Dir its state folder.
	Containerd string `json:"containerd"`
	Dir        string `json:"dir"`
}

// LoadEnv reads the Env a testbed wrote into stateDir.
func LoadEnv(stateDir string) (*Env, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "testbed.json"))
	if err != nil {
		return nil, fmt.Errorf("testbed in %s: %w (is it up? `make up`)", stateDir, err)
	}
	var e Env
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("testbed in %s: %w", stateDir, err)
	}
	return &e, nil
}

func (tb *Testbed) env() *Env {
	e := &Env{
		StateDir:          tb.l.state,
		Kubeconfig:        tb.l.path("kubeconfig"),
		Clusters:          tb.clusters,
		RedisAddr:         tb.redis.Addr(),
		RedisPassword:     tb.redis.Password(),
		XMPPAddr:          tb.ejabberd.C2SAddr(),
		XMPPAddrs:         tb.xmppAddrs(""),
		XMPPDomain:        tb.ejabberd.Domain(),
		XMPPCAFile:        tb.ejabberd.CAFile(),
		XMPPAdminURL:      tb.ejabberd.APIURL(),
		XMPPAdminURLs:     tb.xmppAPIURLs(""),
		XMPPAdminJID:      tb.ejabberd.AdminJID(),
		XMPPAdminPassword: tb.ejabberd.AdminPassword(),
	}
	for _, n := range tb.set.Nodes {
		e.Nodes = append(e.Nodes, n.Name)
	}
	tb.northboundEnv(e)
	e.KarmadaControllers = KarmadaProcessEnv{MetricsURL: "http://" + tb.l.addr(portKarmadaCMMetric) + "/metrics", PprofURL: "http://" + tb.l.addr(portKarmadaCMPprof) + "/debug/pprof/"}
	e.KarmadaScheduler = KarmadaProcessEnv{MetricsURL: "http://" + tb.l.addr(portKarmadaSchedMet) + "/metrics", PprofURL: "http://" + tb.l.addr(portKarmadaSchedPpr) + "/debug/pprof/"}
	e.Agents = AgentsEnv{
		XMPPAddr: tb.ejabberd.C2SAddrOn(tb.net.HostIP()), XMPPAddrs: tb.xmppAddrs(tb.net.HostIP()), RedisAddr: tb.net.HostIP() + ":" + strconv.Itoa(tb.l.port(portRedis)),
		XMPPAdminURL: tb.ejabberd.APIURLOn(tb.net.HostIP()),
		PostgresAddr: tb.l.addr(portPostgres), PostgresPasswordFile: tb.l.path("pki", "postgres.password"),
		KarmadaAPIServer:  fmt.Sprintf("https://%s:%d", tb.net.HostIP(), tb.l.port(portKarmadaAPI)),
		AdminPasswordFile: filepath.Join(tb.l.path("ejabberd"), "admin.password"), RedisPasswordFile: tb.l.path("pki", "redis.password"),
		Descriptions: tb.opts.Descriptions, KwokletState: tb.l.path("kwoklet"), KwokletNodes: tb.kwokletNodes(),
	}
	tb.mlconnectorEnv(e)
	e.Network = NetworkEnv{
		Range: tb.net.Range(), Ranges: tb.net.Ranges(len(tb.clusters)), HostIP: tb.net.HostIP(), Bridge: tb.net.Bridge(),
		ServiceCIDR: tb.net.ServiceCIDR(), KubernetesServiceIP: tb.net.KubernetesServiceIP(), CgroupRoot: tb.cgroupBase(),
	}
	for _, n := range tb.real {
		e.RealNodes = append(e.RealNodes, RealNodeEnv{
			Name: n.name, Context: n.context, IP: tb.net.NodeIP(n.index), PodSubnet: tb.net.PodSubnet(n.index),
			NetNS: tb.net.NetNSFile(n.index), Containerd: tb.nodeSocket(n), Dir: tb.nodeDir(n),
		})
	}
	return e
}

func (tb *Testbed) writeEnv() error {
	e := tb.env()
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(tb.l.path("testbed.json"), b, 0o600); err != nil {
		return err
	}
	var sh strings.Builder
	fmt.Fprintf(&sh, "# MLSysOps testbed endpoints and credentials. Use: . %s\n", tb.l.path("env"))
	for _, kv := range [][2]string{
		{"KUBECONFIG", e.Kubeconfig},
		{"MLSYSOPS_TESTBED_STATE", e.StateDir},
		{"REDIS_ADDR", e.RedisAddr},
		{"REDIS_PASSWORD", e.RedisPassword},
		{"XMPP_ADDR", strings.Join(e.XMPPAddrs, ",")},
		{"XMPP_DOMAIN", e.XMPPDomain},
		{"XMPP_CA_FILE", e.XMPPCAFile},
		{"XMPP_ADMIN_URL", e.XMPPAdminURL},
		{"XMPP_ADMIN_JID", e.XMPPAdminJID},
		{"XMPP_ADMIN_PASSWORD", e.XMPPAdminPassword},
		{"MLS_API_URL", e.NorthboundURL},
		{"MLS_TOKEN", e.NorthboundToken},
		{"MLS_VIEWER_TOKEN", e.NorthboundViewerToken},
		{"MLS_MLCONNECTOR_ENDPOINT", e.MLConnectorURL},
	} {
		fmt.Fprintf(&sh, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	// mls and the other binaries the testbed built.
	fmt.Fprintf(&sh, "export PATH=%s:\"$PATH\"\n", shellQuote(tb.opts.BinDir))
	return os.WriteFile(tb.l.path("env"), []byte(sh.String()), 0o600)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// memberToken is the bearer token Karmada uses with member apiservers,
// generated once per state directory.
func (tb *Testbed) memberToken() (string, error) {
	return readOrCreateSecret(tb.l.path("pki", "karmada-member.token"))
}

func readOrCreateSecret(file string) (string, error) {
	if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	s := services.RandomSecret()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", err
	}
	return s, os.WriteFile(file, []byte(s), 0o600)
}

// RedisUserPasswordFile is the file holding the password of component c's
// Redis ACL user (state.ACLUserName) in the pki folder dir.
func RedisUserPasswordFile(dir string, c state.Component) string {
	return filepath.Join(dir, "redis-"+string(c)+".password")
}

// redisACLUsers returns the ACL user lines of every component
// (state.ACLRules, default key prefix), with passwords read from or
// created in dir (RedisUserPasswordFile, mode 0600). The lines hold only
// the passwords' digests.
func redisACLUsers(dir string) ([]string, error) {
	var lines []string
	for _, c := range state.Components() {
		pw, err := readOrCreateSecret(RedisUserPasswordFile(dir, c))
		if err != nil {
			return nil, err
		}
		l, err := state.ACLUserLine(state.ACLUserName(c), c, "", pw)
		if err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, nil
}
