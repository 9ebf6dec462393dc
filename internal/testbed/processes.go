package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

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
	tb.redis.AlsoListenOn(tb.net.HostIP())
	users, err := redisACLUsers(tb.l.path("pki"))
	if err != nil {
		return nil, err
	}
	tb.redis.SetACLUsers(users)

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
	kcmControllers := kcmMemberControllers
	prof := tb.settings()
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
			extra = prof.memberAPIServer
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
				tb.kcmProcess(e.name, tb.l.memberPort(i, memberKCM), kcmKubeconfig, prof.memberKCMControllers,
					append(prof.memberKCM,
						// Hundreds of applications arrive at once in the
						// benchmarks: the defaults (20 QPS) would be the
						// bottleneck, not MLSysOps.
						"--kube-api-qps=200", "--kube-api-burst=400",
						"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--concurrent-namespace-syncs=10")...),
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
		tb.process("karmada-controller-manager", "karmada-controller-manager", append([]string{
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
			// Profiles for the benchmarks (where a burst's time goes),
			// on loopback.
			"--enable-pprof", "--profiling-bind-address=" + tb.l.addr(portKarmadaCMPprof),
		}, prof.karmadaCM...), httpReady("http://"+tb.l.addr(portKarmadaCMHealth)+"/healthz")),
		tb.process("karmada-scheduler", "karmada-scheduler", []string{
			"--kubeconfig=" + karmadaKubeconfig,
			"--leader-elect=false",
			"--enable-scheduler-estimator=false",
			"--kube-api-qps=200", "--kube-api-burst=400",
			"--rate-limiter-qps=200", "--rate-limiter-bucket-size=1000",
			"--metrics-bind-address=" + tb.l.addr(portKarmadaSchedMet),
			"--enable-pprof", "--profiling-bind-address=" + tb.l.addr(portKarmadaSchedPpr),
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
		tb.settings().kwokLeaseFlag(),
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
