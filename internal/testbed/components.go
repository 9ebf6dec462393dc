package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// certs holds the testbed's certificate authorities and shared key files.
type certs struct {
	ca         *pki.CA // signs serving and client certificates
	frontProxy *pki.CA // signs the aggregator's front-proxy client
	saKey      string
	saPub      string
	dir        string
}

func newCerts(dir string) (*certs, error) {
	ca, err := pki.LoadOrCreateCA(dir, "ca", "mlsysops-testbed-ca")
	if err != nil {
		return nil, err
	}
	fp, err := pki.LoadOrCreateCA(dir, "front-proxy-ca", "mlsysops-testbed-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	key, pub, err := pki.EnsureRSAKey(dir, "sa")
	if err != nil {
		return nil, err
	}
	return &certs{ca: ca, frontProxy: fp, saKey: key, saPub: pub, dir: dir}, nil
}

// serving issues a serving certificate for 127.0.0.1, localhost and the
// given DNS names.
func (c *certs) serving(name string, dns ...string) (string, string, error) {
	return c.ca.Issue(c.dir, name, pki.CertSpec{
		CommonName: name, DNSNames: append([]string{"localhost"}, dns...),
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true,
	})
}

// client issues a client certificate for a user and its groups.
func (c *certs) client(name, user string, groups ...string) (string, string, error) {
	return c.ca.Issue(c.dir, name, pki.CertSpec{CommonName: user, Organization: groups, Client: true})
}

// httpsReady returns a readiness probe that GETs url over TLS trusting the
// testbed CA (or, for components with self-signed serving certificates,
// without verification) and expects 200.
func httpsReady(url string, caFile string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile == "" {
			// Controller managers and schedulers serve health on a
			// self-signed certificate they generate themselves.
			tc.InsecureSkipVerify = true
		} else {
			b, err := os.ReadFile(caFile)
			if err != nil {
				return err
			}
			tc.RootCAs = x509.NewCertPool()
			tc.RootCAs.AppendCertsFromPEM(b)
		}
		return httpGet(ctx, &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, url)
	}
}

// servesTLS returns a probe that is satisfied by any HTTP answer over TLS
// trusting the testbed CA: for servers without a health endpoint.
func servesTLS(url, caFile string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
}

func httpReady(url string) func(ctx context.Context) error {
	return func(ctx context.Context) error { return httpGet(ctx, http.DefaultClient, url) }
}

func httpGet(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}

// process builds a Process whose pid and log files follow the layout.
func (tb *Testbed) process(name, bin string, args []string, ready func(context.Context) error) *proc.Process {
	return &proc.Process{
		Name:    name,
		Path:    filepath.Join(tb.opts.BinDir, bin),
		Args:    args,
		Dir:     tb.l.state,
		LogFile: tb.l.path("logs", name+".log"),
		PIDFile: tb.l.path("pids", name+".pid"),
		Ready:   ready,
	}
}

func (tb *Testbed) etcd() *proc.Process {
	p := tb.process("etcd", "", []string{
		"--name=mlsysops",
		"--data-dir=" + tb.l.path("etcd"),
		"--listen-client-urls=http://" + tb.l.addr(portEtcd),
		"--advertise-client-urls=http://" + tb.l.addr(portEtcd),
		"--listen-peer-urls=http://" + tb.l.addr(portEtcdPeer),
		"--initial-advertise-peer-urls=http://" + tb.l.addr(portEtcdPeer),
		"--initial-cluster=mlsysops=http://" + tb.l.addr(portEtcdPeer),
		"--quota-backend-bytes=4294967296",
		"--snapshot-count=10000",
		"--log-level=warn",
	}, httpReady("http://"+tb.l.addr(portEtcd)+"/health"))
	p.Path = tb.opts.EtcdPath
	return p
}

// EnvProfiling, set to 1, serves the API servers' Go profiles
// (/debug/pprof/ behind their authentication) for benchmarks that say where
// the CPU goes; off by default, as a hardened control plane has it.
const EnvProfiling = "MLSYSOPS_TESTBED_PROFILING"

// apiServer describes one kube-apiserver: the Karmada host's, Karmada's own,
// or a member cluster's. Each keeps its objects under its own etcd prefix.
type apiServer struct {
	name     string // component and context name
	port     int
	tokens   string // token auth file, for Karmada's access to members
	extra    []string
	certFile string
	keyFile  string
}

func (tb *Testbed) apiServerProcess(s apiServer) *proc.Process {
	args := []string{
		"--etcd-servers=http://" + tb.l.addr(portEtcd),
		"--etcd-prefix=/mlsysops/" + s.name,
		// Real nodes and their pods reach the host on the testbed bridge
		// only; the lease reconciler publishes this address as the
		// kubernetes Service's endpoint, which kube-proxy serves.
		"--bind-address=" + tb.net.HostIP(),
		"--advertise-address=" + tb.net.HostIP(),
		"--secure-port=" + strconv.Itoa(s.port),
		"--tls-cert-file=" + s.certFile,
		"--tls-private-key-file=" + s.keyFile,
		"--client-ca-file=" + tb.certs.ca.CertFile,
		"--service-account-key-file=" + tb.certs.saPub,
		"--service-account-signing-key-file=" + tb.certs.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + tb.net.ServiceCIDR(),
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// Logs, exec and port-forward of real nodes' pods.
		"--kubelet-client-certificate=" + tb.l.path("pki", "apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + tb.l.path("pki", "apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + tb.certs.ca.CertFile,
		"--kubelet-preferred-address-types=InternalIP",
		"--proxy-client-cert-file=" + tb.l.path("pki", "front-proxy-client.crt"),
		"--proxy-client-key-file=" + tb.l.path("pki", "front-proxy-client.key"),
		"--requestheader-client-ca-file=" + tb.certs.frontProxy.CertFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--profiling=" + strconv.FormatBool(os.Getenv(EnvProfiling) == "1"),
		"--event-ttl=30m",
	}
	if s.tokens != "" {
		args = append(args, "--token-auth-file="+s.tokens)
	}
	args = append(args, s.extra...)
	return tb.process(s.name+"-apiserver", "kube-apiserver", args,
		httpsReady(fmt.Sprintf("https://%s:%d/readyz", tb.net.HostIP(), s.port), tb.certs.ca.CertFile))
}

// kcm describes a kube-controller-manager for one apiserver.
func (tb *Testbed) kcmProcess(cluster string, port int, kubeconfig string, controllers string, extra ...string) *proc.Process {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + tb.l.path("run", cluster+"-kcm"),
		"--cluster-name=" + cluster,
		"--cluster-signing-cert-file=" + tb.certs.ca.CertFile,
		"--cluster-signing-key-file=" + tb.l.path("pki", "ca.key"),
		"--root-ca-file=" + tb.certs.ca.CertFile,
		"--service-account-private-key-file=" + tb.certs.saKey,
		"--use-service-account-credentials=true",
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--profiling=false",
	}
	args = append(args, extra...)
	return tb.process(cluster+"-kube-controller-manager", "kube-controller-manager", args,
		httpsReady(fmt.Sprintf("https://127.0.0.1:%d/healthz", port), ""))
}

func (tb *Testbed) schedulerProcess(cluster string, port int, kubeconfig string) *proc.Process {
	return tb.process(cluster+"-kube-scheduler", "kube-scheduler", []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + tb.l.path("run", cluster+"-scheduler"),
		"--leader-elect=false",
		"--profiling=false",
		"--kube-api-qps=200", "--kube-api-burst=400",
	}, httpsReady(fmt.Sprintf("https://127.0.0.1:%d/healthz", port), ""))
}

// waitAll waits for the processes to be ready, in parallel.
func waitAll(ctx context.Context, ps ...*proc.Process) error {
	errs := make(chan error, len(ps))
	for _, p := range ps {
		go func() { errs <- p.WaitReady(ctx) }()
	}
	var first error
	for range ps {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
