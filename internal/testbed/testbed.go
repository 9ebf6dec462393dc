package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// Options configure a testbed. The zero value of every field but BinDir has
// a usable default.
type Options struct {
	// Descriptions is the folder with continuum/, clusters/ and nodes/.
	Descriptions string
	// StateDir keeps data, certificates, logs, pid files, the kubeconfig
	// and the env file.
	StateDir string
	// PortBase is the first of the loopback ports the testbed uses; see
	// the port offsets in layout.go.
	PortBase int
	// BinDir holds the binaries `make deps` builds.
	BinDir string
	// EtcdPath is the etcd binary (Debian's etcd-server by default).
	EtcdPath string
	// XMPPDomain is the XMPP domain agents use.
	XMPPDomain string
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// SkipAgents leaves the MLSysOps agents out (see agents.go). Inside a
	// test binary they are always left out: the shared test testbed's
	// tests run their own agents and controllers.
	SkipAgents bool
	// KWOKOnly runs no real node: every node is simulated by KWOK (see
	// realnode.go). Real nodes need root, containerd, runc and the CNI
	// plugins (`make deps`).
	KWOKOnly bool
}

// Defaults for Options.
const (
	DefaultDescriptions = "descriptions"
	DefaultStateDir     = ".testbed"
	DefaultPortBase     = 16000
	DefaultXMPPDomain   = "mlsysops.local"
)

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	if o.PortBase < 1024 || o.PortBase > 65535-portMembers-10*50 {
		errs = append(errs, fmt.Errorf("port base %d: must be between 1024 and %d", o.PortBase, 65535-portMembers-10*50))
	}
	if o.StateDir == "" {
		errs = append(errs, errors.New("state directory: must not be empty"))
	}
	if o.Descriptions == "" {
		errs = append(errs, errors.New("descriptions directory: must not be empty"))
	}
	return errors.Join(errs...)
}

func (o *Options) defaults() {
	if o.Descriptions == "" {
		o.Descriptions = DefaultDescriptions
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.PortBase == 0 {
		o.PortBase = DefaultPortBase
	}
	if o.BinDir == "" {
		o.BinDir = "bin"
	}
	if o.EtcdPath == "" {
		o.EtcdPath = "/usr/bin/etcd"
	}
	if o.XMPPDomain == "" {
		o.XMPPDomain = DefaultXMPPDomain
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// Testbed is a local continuum described by a description folder.
type Testbed struct {
	outMu    sync.Mutex
	opts     Options
	l        layout
	set      *description.Set
	clusters []string // member cluster names, sorted
	certs    *certs
	redis    *services.Redis
	ejabberd *services.Ejabberd
	net      netPlan
	real     []*realNode
	// readyIn is how long each real node took from the start of its
	// containerd to Ready, in the last Up.
	readyMu sync.Mutex
	readyIn map[string]time.Duration
}

// RealNodeReadyTimes returns how long each real node took, in the last
// Up, from the start of its containerd to Ready (reused nodes included).
func (tb *Testbed) RealNodeReadyTimes() map[string]time.Duration {
	tb.readyMu.Lock()
	defer tb.readyMu.Unlock()
	out := map[string]time.Duration{}
	for k, v := range tb.readyIn {
		out[k] = v
	}
	return out
}

// New loads the descriptions and prepares (but does not start) a testbed.
func New(opts Options) (*Testbed, error) {
	opts.defaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var err error
	for _, p := range []*string{&opts.Descriptions, &opts.StateDir, &opts.BinDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	set, err := description.LoadDir(opts.Descriptions)
	if err != nil {
		return nil, fmt.Errorf("descriptions in %s: %w", opts.Descriptions, err)
	}
	if len(set.Clusters) == 0 {
		return nil, fmt.Errorf("descriptions in %s: no cluster in clusters/; the testbed starts one member cluster per cluster file", opts.Descriptions)
	}
	tb := &Testbed{opts: opts, l: layout{state: opts.StateDir, base: opts.PortBase}, set: set}
	for _, c := range set.Clusters {
		tb.clusters = append(tb.clusters, c.Name)
	}
	sort.Strings(tb.clusters)
	if len(tb.clusters) > maxNetClusters {
		return nil, fmt.Errorf("descriptions in %s: %d clusters; the testbed runs at most %d", opts.Descriptions, len(tb.clusters), maxNetClusters)
	}
	tb.net = newNetPlan(opts.PortBase)
	if tb.real, err = tb.planRealNodes(); err != nil {
		return nil, fmt.Errorf("descriptions in %s: %w", opts.Descriptions, err)
	}
	tb.redis = services.NewRedis(tb.l.path("redis"), tb.l.port(portRedis), "")
	tb.ejabberd = services.NewEjabberd(tb.l.path("ejabberd"), tb.l.port(portEjabberd), opts.XMPPDomain)
	return tb, nil
}

func (tb *Testbed) progress(format string, args ...any) {
	// Services start in goroutines beside the control planes.
	tb.outMu.Lock()
	defer tb.outMu.Unlock()
	fmt.Fprintf(tb.opts.Out, "  %-28s %s\n", args[0], fmt.Sprintf(format, args[1:]...))
}

// Env is what clients need to use a running testbed. Up writes it to
// <state>/testbed.json and, as shell exports, to <state>/env.
type Env struct {
	StateDir   string   `json:"stateDir"`
	Kubeconfig string   `json:"kubeconfig"`
	Clusters   []string `json:"clusters"`
	Nodes      []string `json:"nodes"`

	RedisAddr     string `json:"redisAddr"`
	RedisPassword string `json:"redisPassword"`

	XMPPAddr          string `json:"xmppAddr"`
	XMPPDomain        string `json:"xmppDomain"`
	XMPPCAFile        string `json:"xmppCAFile"`
	XMPPAdminURL      string `json:"xmppAdminURL"`
	XMPPAdminJID      string `json:"xmppAdminJID"`
	XMPPAdminPassword string `json:"xmppAdminPassword"`

	// The northbound API and its operator and viewer tokens.
	NorthboundURL         string `json:"northboundURL"`
	NorthboundToken       string `json:"northboundToken"`
	NorthboundViewerToken string `json:"northboundViewerToken"`

	// Network is the testbed's address plan (see netPlan).
	Network NetworkEnv `json:"network"`
	// RealNodes are the nodes with containerd and a kubelet.
	RealNodes []RealNodeEnv `json:"realNodes"`
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
		XMPPDomain:        tb.ejabberd.Domain(),
		XMPPCAFile:        tb.ejabberd.CAFile(),
		XMPPAdminURL:      tb.ejabberd.APIURL(),
		XMPPAdminJID:      tb.ejabberd.AdminJID(),
		XMPPAdminPassword: tb.ejabberd.AdminPassword(),
	}
	for _, n := range tb.set.Nodes {
		e.Nodes = append(e.Nodes, n.Name)
	}
	tb.northboundEnv(e)
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
		{"XMPP_ADDR", e.XMPPAddr},
		{"XMPP_DOMAIN", e.XMPPDomain},
		{"XMPP_CA_FILE", e.XMPPCAFile},
		{"XMPP_ADMIN_URL", e.XMPPAdminURL},
		{"XMPP_ADMIN_JID", e.XMPPAdminJID},
		{"XMPP_ADMIN_PASSWORD", e.XMPPAdminPassword},
		{"MLS_API_URL", e.NorthboundURL},
		{"MLS_TOKEN", e.NorthboundToken},
		{"MLS_VIEWER_TOKEN", e.NorthboundViewerToken},
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

// plan lists every process of the testbed in start order groups: the
// processes of a group start together once the previous group is ready.
type plan struct {
	etcd       *proc.Process
	apiservers []*proc.Process
	managers   []*proc.Process // controller managers, schedulers, kwok
	karmada    []*proc.Process // aggregated apiserver, webhook
	karmadaCtl []*proc.Process // karmada controller-manager and scheduler
}

func (p *plan) all() []*proc.Process {
	out := []*proc.Process{p.etcd}
	out = append(out, p.apiservers...)
	out = append(out, p.managers...)
	out = append(out, p.karmada...)
	return append(out, p.karmadaCtl...)
}

// prepare writes certificates, kubeconfigs and token files and returns the
// plan of processes.
func (tb *Testbed) prepare() (*plan, error) {
	for _, d := range []string{"pki", "logs", "pids", "run"} {
		if err := os.MkdirAll(tb.l.path(d), 0o700); err != nil {
			return nil, err
		}
	}
	// ejabberd runs as its own user and must reach its directory.
	if err := os.Chmod(tb.l.state, 0o755); err != nil {
		return nil, err
	}
	c, err := newCerts(tb.l.path("pki"))
	if err != nil {
		return nil, err
	}
	tb.certs = c
	pw, err := readOrCreateSecret(tb.l.path("pki", "redis.password"))
	if err != nil {
		return nil, err
	}
	tb.redis = services.NewRedis(tb.l.path("redis"), tb.l.port(portRedis), pw)

	// Real pods reach the apiservers on the host's bridge address, or as
	// the kubernetes Service's ClusterIP.
	apiCert, apiKey, err := c.ca.Issue(c.dir, "apiserver-"+tb.net.HostIP(), pki.CertSpec{
		CommonName: "apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(tb.net.HostIP()), net.ParseIP(tb.net.KubernetesServiceIP())},
		Server:     true,
	})
	if err != nil {
		return nil, err
	}
	if _, _, err := c.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"); err != nil {
		return nil, err
	}
	admCert, admKey, err := c.serving("testbed-admission")
	if err != nil {
		return nil, err
	}
	if _, _, err := c.frontProxy.Issue(c.dir, "front-proxy-client", pkiClient("front-proxy-client")); err != nil {
		return nil, err
	}
	adminCert, adminKey, err := c.client("admin", "mlsysops-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	kcmCert, kcmKey, err := c.client("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return nil, err
	}
	schedCert, schedKey, err := c.client("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return nil, err
	}
	aggCert, aggKey, err := c.serving("karmada-aggregated-apiserver", aggregatedAPIService+"."+karmadaSystemNamespace+".svc")
	if err != nil {
		return nil, err
	}
	// karmada-webhook reads tls.crt and tls.key from its cert dir.
	whCert, whKey, err := c.serving("karmada-webhook")
	if err != nil {
		return nil, err
	}
	whDir := tb.l.path("run", "karmada-webhook")
	if err := os.MkdirAll(whDir, 0o700); err != nil {
		return nil, err
	}
	for src, dst := range map[string]string{whCert: "tls.crt", whKey: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(whDir, dst), b, 0o600); err != nil {
			return nil, err
		}
	}

	kwokConfig := "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n"
	if err := os.WriteFile(tb.l.path("run", "kwok.yaml"), []byte(kwokConfig), 0o644); err != nil {
		return nil, err
	}
	token, err := tb.memberToken()
	if err != nil {
		return nil, err
	}
	tokens := tb.l.path("pki", "member-tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",karmada,karmada,system:masters\n"), 0o600); err != nil {
		return nil, err
	}

	// One kubeconfig per identity per cluster, plus the user's.
	entries := []kubeconfigEntry{
		{ContextHost, tb.apiServerURL(ContextHost), adminCert, adminKey},
		{ContextKarmada, tb.apiServerURL(ContextKarmada), adminCert, adminKey},
	}
	for _, name := range tb.clusters {
		entries = append(entries, kubeconfigEntry{name, tb.apiServerURL(name), adminCert, adminKey})
	}
	if err := writeKubeconfig(tb.l.path("kubeconfig"), c.ca.CertFile, ContextKarmada, entries...); err != nil {
		return nil, err
	}
	kubeconfigFor := func(e kubeconfigEntry, cert, key, who string) (string, error) {
		f := tb.l.path("run", e.name+"-"+who+".kubeconfig")
		return f, writeKubeconfig(f, c.ca.CertFile, e.name, kubeconfigEntry{e.name, e.server, cert, key})
	}

	p := &plan{etcd: tb.etcd()}
	kcmControllers := "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route,-persistentvolume-binder,-persistentvolume-expander,-attachdetach"
	for _, e := range entries {
		port := tb.l.port(portHostAPIServer)
		var extra []string
		tokenFile := ""
		switch e.name {
		case ContextHost:
		case ContextKarmada:
			port = tb.l.port(portKarmadaAPI)
			extra = []string{"--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount"}
		default:
			port = tb.l.memberPort(tb.memberIndex(e.name), memberAPIServer)
			tokenFile = tokens
		}
		p.apiservers = append(p.apiservers, tb.apiServerProcess(apiServer{name: componentPrefix(e.name), port: port, tokens: tokenFile, extra: extra, certFile: apiCert, keyFile: apiKey}))
		kcmKubeconfig, err := kubeconfigFor(e, kcmCert, kcmKey, "kcm")
		if err != nil {
			return nil, err
		}
		switch e.name {
		case ContextHost:
			schedKubeconfig, err := kubeconfigFor(e, schedCert, schedKey, "scheduler")
			if err != nil {
				return nil, err
			}
			// The host's real node runs the continuum agent's pods.
			p.managers = append(p.managers, tb.kcmProcess(componentPrefix(e.name), tb.l.port(portHostKCM), kcmKubeconfig, kcmControllers),
				tb.schedulerProcess(componentPrefix(e.name), tb.l.port(portHostScheduler), schedKubeconfig))
		case ContextKarmada:
			p.managers = append(p.managers, tb.kcmProcess(componentPrefix(e.name), tb.l.port(portKarmadaKCM), kcmKubeconfig, "namespace,garbagecollector,serviceaccount-token,clusterrole-aggregation,ttl-after-finished,csrsigning,csrcleaner"))
		default:
			i := tb.memberIndex(e.name)
			schedKubeconfig, err := kubeconfigFor(e, schedCert, schedKey, "scheduler")
			if err != nil {
				return nil, err
			}
			adminKubeconfig, err := kubeconfigFor(e, adminCert, adminKey, "admin")
			if err != nil {
				return nil, err
			}
			p.managers = append(p.managers,
				tb.kcmProcess(e.name, tb.l.memberPort(i, memberKCM), kcmKubeconfig, kcmControllers,
					"--node-monitor-grace-period=20s", "--node-monitor-period=2s",
					// Hundreds of applications arrive at once in the
					// benchmarks: the defaults (20 QPS) would be the
					// bottleneck, not MLSysOps.
					"--kube-api-qps=200", "--kube-api-burst=400",
					"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--concurrent-namespace-syncs=10"),
				tb.schedulerProcess(e.name, tb.l.memberPort(i, memberScheduler), schedKubeconfig),
				tb.kwokProcess(e.name, i, adminKubeconfig))
		}
	}
	karmadaKubeconfig, err := kubeconfigFor(entries[1], adminCert, adminKey, "admin")
	if err != nil {
		return nil, err
	}
	if len(tb.real) > 0 {
		args := []string{"admission", "--listen=" + tb.l.addr(portAdmission), "--cert=" + admCert, "--key=" + admKey,
			"--images-manifest=" + filepath.Join(tb.imagesDir(), images.ManifestFile)}
		p.managers = append(p.managers, tb.process("testbed-admission", testbedBinary, args, servesTLS(tb.l.url(portAdmission)+"/mutate", c.ca.CertFile)))
	}
	p.karmada = []*proc.Process{
		tb.process("karmada-aggregated-apiserver", "karmada-aggregated-apiserver", []string{
			"--kubeconfig=" + karmadaKubeconfig,
			"--authentication-kubeconfig=" + karmadaKubeconfig,
			"--authorization-kubeconfig=" + karmadaKubeconfig,
			"--etcd-servers=http://" + tb.l.addr(portEtcd),
			"--etcd-prefix=/mlsysops/karmada-aggregated",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(tb.l.port(portKarmadaAgg)),
			"--tls-cert-file=" + aggCert,
			"--tls-private-key-file=" + aggKey,
			"--audit-log-path=-",
			"--audit-log-maxage=0",
			"--audit-log-maxbackup=0",
		}, httpsReady(tb.l.url(portKarmadaAgg)+"/readyz", c.ca.CertFile)),
		tb.process("karmada-webhook", "karmada-webhook", []string{
			"--kubeconfig=" + karmadaKubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(tb.l.port(portKarmadaWebhook)),
			"--cert-dir=" + whDir,
			"--metrics-bind-address=" + tb.l.addr(portWebhookMetrics),
			"--health-probe-bind-address=" + tb.l.addr(portWebhookHealth),
			"--default-not-ready-toleration-seconds=30",
			"--default-unreachable-toleration-seconds=30",
		}, servesTLS(tb.l.url(portKarmadaWebhook)+"/", c.ca.CertFile)),
	}
	p.karmadaCtl = []*proc.Process{
		tb.process("karmada-controller-manager", "karmada-controller-manager", []string{
			"--kubeconfig=" + karmadaKubeconfig,
			"--leader-elect=false",
			"--metrics-bind-address=" + tb.l.addr(portKarmadaCMMetric),
			"--health-probe-bind-address=" + tb.l.addr(portKarmadaCMHealth),
			"--cluster-status-update-frequency=5s",
			"--cluster-monitor-period=2s",
			"--cluster-monitor-grace-period=20s",
			"--failover-eviction-timeout=30s",
			"--controllers=*",
			// Room for bursts of applications (defaults: 40 QPS to each
			// apiserver, 10 queue items per second per controller).
			"--kube-api-qps=200", "--kube-api-burst=400",
			"--cluster-api-qps=200", "--cluster-api-burst=400",
			"--rate-limiter-qps=200", "--rate-limiter-bucket-size=1000",
			"--concurrent-resourcebinding-syncs=10", "--concurrent-work-syncs=10", "--concurrent-resource-template-syncs=10",
		}, httpReady("http://"+tb.l.addr(portKarmadaCMHealth)+"/healthz")),
		tb.process("karmada-scheduler", "karmada-scheduler", []string{
			"--kubeconfig=" + karmadaKubeconfig,
			"--leader-elect=false",
			"--enable-scheduler-estimator=false",
			"--kube-api-qps=200", "--kube-api-burst=400",
			"--rate-limiter-qps=200", "--rate-limiter-bucket-size=1000",
			"--metrics-bind-address=" + tb.l.addr(portKarmadaSchedMet),
			"--health-probe-bind-address=" + tb.l.addr(portKarmadaSchedHlt),
		}, httpReady("http://"+tb.l.addr(portKarmadaSchedHlt)+"/healthz")),
	}
	return p, nil
}

// componentPrefix names the processes of a kubeconfig context's cluster:
// karmada-host-*, karmada-* and <member>-*.
func componentPrefix(context string) string {
	if context == ContextKarmada {
		return "karmada"
	}
	return context
}

func (tb *Testbed) memberIndex(name string) int {
	return sort.SearchStrings(tb.clusters, name)
}

func (tb *Testbed) kwokProcess(cluster string, i int, kubeconfig string) *proc.Process {
	return tb.process(cluster+"-kwok", "kwok", []string{
		"--kubeconfig=" + kubeconfig,
		// Our own (empty) configuration rather than ~/.kwok: default stages.
		"--config=" + tb.l.path("run", "kwok.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-label-selector=" + KWOKLabel + "=fake",
		"--cidr=" + tb.net.KWOKCIDR(i),
		"--node-ip=" + tb.net.KWOKNodeIP(i),
		"--node-lease-duration-seconds=20",
		"--server-address=" + fmt.Sprintf("127.0.0.1:%d", tb.l.memberPort(i, memberKwok)),
	}, httpReady(fmt.Sprintf("http://127.0.0.1:%d/healthz", tb.l.memberPort(i, memberKwok))))
}

// startAll starts every process of the group that is not already running
// and waits for all of them to be ready.
func (tb *Testbed) startAll(ctx context.Context, ps []*proc.Process) error {
	for _, p := range ps {
		if _, ok := p.Pid(); ok {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := p.Ready(cctx)
			cancel()
			switch {
			case err == nil && p.SameCommand():
				tb.progress("reused (pid file %s)", p.Name, filepath.Base(p.PIDFile))
				continue
			case err == nil:
				tb.progress("configuration changed: restarting", p.Name)
			default:
				tb.progress("running but not ready (%v): restarting", p.Name, err)
			}
			if err := p.Stop(10 * time.Second); err != nil {
				return err
			}
		}
		if _, err := os.Stat(p.Path); err != nil {
			return fmt.Errorf("%s: binary %s missing: run `make deps`", p.Name, p.Path)
		}
		if err := p.Start(); err != nil {
			return err
		}
		tb.progress("started, log %s", p.Name, tb.rel(p.LogFile))
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return waitAll(wctx, ps...)
}

func (tb *Testbed) rel(p string) string {
	if r, err := filepath.Rel(filepath.Dir(tb.l.state), p); err == nil {
		return r
	}
	return p
}

// Up starts every component that is not already running and healthy,
// registers the member clusters in Karmada, creates the KWOK nodes, and
// writes the kubeconfig and env files. It returns once every cluster is
// Ready in Karmada.
func (tb *Testbed) Up(ctx context.Context) (*Env, error) {
	start := time.Now()
	fmt.Fprintf(tb.opts.Out, "MLSysOps testbed: %d clusters, %d nodes (%d real), state in %s\n", len(tb.clusters), len(tb.set.Nodes), len(tb.real), tb.l.state)
	// The apiservers listen on the host's address on the testbed bridge.
	if err := tb.net.setupHost(); err != nil {
		return nil, fmt.Errorf("testbed network (needs root and ip(8)): %w", err)
	}
	var imgs *builtImages
	if len(tb.real) > 0 {
		imgs = tb.ensureImages(ctx)
		if err := tb.buildTestbedBinary(ctx); err != nil {
			return nil, err
		}
	}
	p, err := tb.prepare()
	if err != nil {
		return nil, err
	}
	if err := tb.stopStale(p); err != nil {
		return nil, err
	}

	// Redis and ejabberd start beside the Kubernetes control planes.
	var svcWG sync.WaitGroup
	var redisErr, ejErr error
	svcWG.Add(2)
	go func() {
		defer svcWG.Done()
		if redisErr = tb.redis.Start(ctx); redisErr == nil {
			tb.progress("ready on %s", "redis", tb.redis.Addr())
		}
	}()
	go func() {
		defer svcWG.Done()
		if ejErr = tb.ejabberd.Start(ctx); ejErr == nil {
			tb.progress("ready on %s (domain %s)", "ejabberd", tb.ejabberd.C2SAddr(), tb.ejabberd.Domain())
		} else {
			ejErr = fmt.Errorf("%w; see %s", ejErr, tb.ejabberd.LogFile())
		}
	}()

	steps := []struct {
		what string
		ps   []*proc.Process
		then func(ctx context.Context) error
	}{
		{"etcd", []*proc.Process{p.etcd}, nil},
		{"apiservers", p.apiservers, nil},
		{"controllers", p.managers, tb.installKarmadaCRDs},
		{"karmada apiservers", p.karmada, tb.registerKarmadaAPIs},
		{"karmada controllers", p.karmadaCtl, tb.joinClusters},
	}
	for _, s := range steps {
		if err := tb.startAll(ctx, s.ps); err != nil {
			svcWG.Wait()
			return nil, err
		}
		if s.then != nil {
			if err := s.then(ctx); err != nil {
				svcWG.Wait()
				return nil, err
			}
		}
	}
	if err := tb.installAdmission(ctx); err != nil {
		svcWG.Wait()
		return nil, err
	}
	if err := tb.createNodes(ctx); err != nil {
		svcWG.Wait()
		return nil, err
	}
	if err := tb.startRealNodes(ctx, tb.real, imgs); err != nil {
		svcWG.Wait()
		return nil, err
	}
	svcWG.Wait()
	if err := errors.Join(redisErr, ejErr); err != nil {
		return nil, err
	}
	if err := tb.startNorthbound(ctx); err != nil {
		return nil, err
	}
	if err := tb.writeEnv(); err != nil {
		return nil, err
	}
	if !tb.opts.SkipAgents && !testing.Testing() {
		if err := tb.startAgents(ctx); err != nil {
			return nil, fmt.Errorf("agents: %w", err)
		}
	}
	fmt.Fprintf(tb.opts.Out, "ready in %.1fs. Use it with:\n  . %s\n  kubectl --context karmada-apiserver get clusters\n",
		time.Since(start).Seconds(), tb.rel(tb.l.path("env")))
	return tb.env(), nil
}

func (tb *Testbed) karmadaConfig() (*rest.Config, error) {
	return restConfig(tb.l.path("kubeconfig"), ContextKarmada)
}

func (tb *Testbed) installKarmadaCRDs(ctx context.Context) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	if err := installKarmadaCRDs(ctx, cfg, filepath.Join(tb.opts.BinDir, "karmada-crds", "bases")); err != nil {
		return fmt.Errorf("karmada CRDs: %w", err)
	}
	tb.progress("installed", "karmada CRDs")
	return nil
}

func (tb *Testbed) registerKarmadaAPIs(ctx context.Context) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	if err := registerAggregatedAPI(ctx, cfg, tb.l.port(portKarmadaAgg), tb.certs.ca.CertFile); err != nil {
		return fmt.Errorf("%w; see %s", err, tb.rel(tb.l.path("logs", "karmada-aggregated-apiserver.log")))
	}
	if err := installWebhookConfiguration(ctx, cfg, filepath.Join(tb.opts.BinDir, "karmada-crds", "webhook-configuration.yaml"), tb.l.port(portKarmadaWebhook), tb.certs.ca.CertFile); err != nil {
		return err
	}
	tb.progress("registered (cluster.karmada.io, admission webhooks)", "karmada APIs")
	return nil
}

func (tb *Testbed) joinClusters(ctx context.Context) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	token, err := tb.memberToken()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, name := range tb.clusters {
		keep[name] = true
		server := tb.apiServerURL(name)
		if err := joinCluster(ctx, cfg, name, server, token, tb.certs.ca.CertFile); err != nil {
			return err
		}
	}
	if err := unjoinStale(ctx, cfg, keep); err != nil {
		return err
	}
	if err := waitClustersReady(ctx, cfg, tb.clusters, 2*time.Minute); err != nil {
		return err
	}
	tb.progress("%s joined in Push mode, Ready", "member clusters", strings.Join(tb.clusters, ", "))
	return nil
}

// stopStale stops processes left by an earlier run that the current plan
// does not have, such as the components of a cluster whose description was
// removed.
func (tb *Testbed) stopStale(p *plan) error {
	want := map[string]bool{tb.northboundPIDFile(): true}
	for _, pr := range p.all() {
		want[pr.PIDFile] = true
	}
	for _, n := range tb.real {
		for _, pr := range tb.nodeProcesses(n) {
			want[pr.PIDFile] = true
		}
	}
	if as, _, err := tb.agents(); err == nil && !tb.opts.SkipAgents {
		for _, a := range as {
			want[a.PIDFile] = true
		}
	}
	files, _ := filepath.Glob(tb.l.path("pids", "*.pid"))
	for _, f := range files {
		if want[f] {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		stale := &proc.Process{Name: name, PIDFile: f}
		if err := stale.Stop(10 * time.Second); err != nil {
			return err
		}
		tb.progress("stopped (no longer described)", name)
	}
	return nil
}

// Down stops every process of the testbed, including those of clusters no
// longer described. The state directory stays unless purge is set.
func (tb *Testbed) Down(ctx context.Context, purge bool) error {
	var errs []error
	// Real nodes first: their kubelets would report every apiserver gone.
	if err := tb.stopRealNodes(); err != nil {
		errs = append(errs, fmt.Errorf("real nodes: %w", err))
	}
	if err := tb.ejabberd.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	files, _ := filepath.Glob(tb.l.path("pids", "*.pid"))
	// Stop controllers before apiservers and etcd last, so nothing logs a
	// storm of connection errors on the way down.
	rank := func(f string) int {
		switch {
		case strings.HasSuffix(f, "etcd.pid"):
			return 2
		case strings.HasSuffix(f, "-apiserver.pid"):
			return 1
		}
		return 0
	}
	sort.SliceStable(files, func(i, j int) bool { return rank(files[i]) < rank(files[j]) })
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if err := (&proc.Process{Name: name, PIDFile: f}).Stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		} else {
			tb.progress("stopped", name)
		}
	}
	if pw, err := os.ReadFile(tb.l.path("pki", "redis.password")); err == nil {
		tb.redis = services.NewRedis(tb.l.path("redis"), tb.l.port(portRedis), string(pw))
	}
	if err := tb.redis.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	tb.progress("stopped", "redis")
	tb.progress("stopped", "ejabberd")
	if err := tb.net.teardown(); err != nil {
		errs = append(errs, fmt.Errorf("testbed network: %w", err))
	} else {
		tb.progress("removed (bridge %s, routes of %s)", "network", tb.net.Bridge(), tb.net.Range())
	}
	if err := releaseHostState(tb.l.state); err != nil {
		errs = append(errs, fmt.Errorf("host state: %w", err))
	}
	if len(errs) == 0 && purge {
		if err := os.RemoveAll(tb.l.state); err != nil {
			errs = append(errs, err)
		}
		tb.progress("removed %s", "state", tb.l.state)
	}
	return errors.Join(errs...)
}

// StopCluster stops every process of a member cluster (its API server,
// controller manager, scheduler and KWOK), as if the cluster went away;
// Karmada sees it NotReady within its grace period. Up starts it again.
func (tb *Testbed) StopCluster(name string) error {
	if !slices.Contains(tb.clusters, name) {
		return fmt.Errorf("no member cluster %s (have %v)", name, tb.clusters)
	}
	files, _ := filepath.Glob(tb.l.path("pids", name+"-*.pid"))
	// The API server last, like Down.
	sort.SliceStable(files, func(i, j int) bool {
		return !strings.HasSuffix(files[i], "-apiserver.pid") && strings.HasSuffix(files[j], "-apiserver.pid")
	})
	var errs []error
	for _, f := range files {
		pname := strings.TrimSuffix(filepath.Base(f), ".pid")
		if err := (&proc.Process{Name: pname, PIDFile: f}).Stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		} else {
			tb.progress("stopped", pname)
		}
	}
	if len(files) == 0 {
		errs = append(errs, fmt.Errorf("member cluster %s: no running process", name))
	}
	return errors.Join(errs...)
}

// ComponentStatus is the state of one component.
type ComponentStatus struct {
	Name    string
	Running bool
	Pid     int
	Ready   bool
	Detail  string
	LogFile string
}

// Status reports every component of the plan: running, pid, ready.
func (tb *Testbed) Status(ctx context.Context) ([]ComponentStatus, error) {
	p, err := tb.prepare()
	if err != nil {
		return nil, err
	}
	var out []ComponentStatus
	for _, pr := range p.all() {
		s := ComponentStatus{Name: pr.Name, LogFile: tb.rel(pr.LogFile)}
		s.Pid, s.Running = pr.Pid()
		if s.Running {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			if err := pr.Ready(cctx); err != nil {
				s.Detail = err.Error()
			} else {
				s.Ready = true
			}
			cancel()
		}
		out = append(out, s)
	}
	for _, svc := range []struct {
		name    string
		pid     func() (int, bool)
		healthy func(context.Context) error
		log     string
	}{
		{"redis", tb.redis.Pid, tb.redis.Healthy, tb.redis.LogFile()},
		{"ejabberd", tb.ejabberd.Pid, tb.ejabberd.Healthy, tb.ejabberd.LogFile()},
		{northboundName, tb.northboundPid, tb.northboundHealthy, tb.l.path("logs", northboundName+".log")},
	} {
		s := ComponentStatus{Name: svc.name, LogFile: tb.rel(svc.log)}
		s.Pid, s.Running = svc.pid()
		if s.Running {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			if err := svc.healthy(cctx); err != nil {
				s.Detail = err.Error()
			} else {
				s.Ready = true
			}
			cancel()
		}
		out = append(out, s)
	}
	for _, n := range tb.real {
		for _, pr := range tb.nodeProcesses(n) {
			s := ComponentStatus{Name: pr.Name, LogFile: tb.rel(pr.LogFile)}
			s.Pid, s.Running = pr.Pid()
			if s.Running {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				if err := pr.Ready(cctx); err != nil {
					s.Detail = err.Error()
				} else {
					s.Ready = true
				}
				cancel()
			}
			out = append(out, s)
		}
	}
	if as, _, err := tb.agents(); err == nil && !tb.opts.SkipAgents {
		for _, a := range as {
			s := ComponentStatus{Name: a.Process.Name, LogFile: tb.rel(a.LogFile)}
			if s.Pid, s.Running = a.Pid(); s.Running {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				if err := a.Ready(cctx); err != nil {
					s.Detail = err.Error()
				} else {
					s.Ready = true
				}
				cancel()
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// Kill kills every process of the testbed with SIGKILL, as a crash would:
// components, services, real nodes' containerd, kubelet, kube-proxy,
// shims and containers. State, mounts, namespaces, cgroups, routes and the
// bridge stay; Up starts from there, Down removes them.
func (tb *Testbed) Kill() error {
	var errs []error
	files, _ := filepath.Glob(tb.l.path("pids", "*.pid"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if err := (&proc.Process{Name: name, PIDFile: f}).Kill(); err != nil && !strings.Contains(err.Error(), "not running") {
			errs = append(errs, err)
		}
	}
	if pw, err := os.ReadFile(tb.l.path("pki", "redis.password")); err == nil {
		tb.redis = services.NewRedis(tb.l.path("redis"), tb.l.port(portRedis), string(pw))
	}
	_ = tb.redis.Kill()
	_ = tb.ejabberd.Kill()
	if err := killCgroup(tb.cgroupBase(), 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
