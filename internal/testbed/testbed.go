package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/description"
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
	// Profile tunes the control planes and agents for the size of the
	// continuum (profile.go); empty is ProfileDefault.
	Profile Profile
	// XMPPNodes is the number of ejabberd nodes, joined into one cluster
	// when more than one (see services.NewEjabberdCluster); every agent
	// and the northbound API get every node's address. Zero keeps what
	// the state folder last ran (one node for a new one).
	XMPPNodes int
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
	if err := o.Profile.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.XMPPNodes < 0 || o.XMPPNodes > services.MaxEjabberdNodes {
		errs = append(errs, fmt.Errorf("XMPP nodes %d: want 1 to %d (0: as the state folder last ran)", o.XMPPNodes, services.MaxEjabberdNodes))
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
	// ejabberd is the first (or only) ejabberd node; ejabberdPeers are
	// the other nodes of its cluster, ejabberdSpare the nodes a larger
	// cluster of an earlier Up had, stopped when found running.
	ejabberd      *services.Ejabberd
	ejabberdPeers []*services.Ejabberd
	ejabberdSpare []*services.Ejabberd
	net           netPlan
	real          []*realNode
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
	if err := tb.planEjabberd(); err != nil {
		return nil, err
	}
	return tb, nil
}

func (tb *Testbed) progress(format string, args ...any) {
	// Services start in goroutines beside the control planes.
	tb.outMu.Lock()
	defer tb.outMu.Unlock()
	fmt.Fprintf(tb.opts.Out, "  %-28s %s\n", args[0], fmt.Sprintf(format, args[1:]...))
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
	// The images run on the real nodes; the kwoklets run their programs
	// on KWOK nodes (which only a testbed with real nodes runs). Without
	// real nodes nothing imports them: the scale profile does not build
	// them (minutes of CPU).
	var imgs *builtImages
	if len(tb.real) > 0 {
		imgs = tb.ensureImages(ctx)
	}
	if err := tb.buildTestbedBinary(ctx); err != nil {
		return nil, err
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
		ejErr = tb.startXMPP(ctx)
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
	if err := tb.startMLConnector(ctx, imgs); err != nil {
		return nil, fmt.Errorf("ML connector: %w", err)
	}
	installed := tb.settings().realNodes && !tb.opts.KWOKOnly
	if installed && tb.settings().nodeAgents && len(tb.real) > 0 {
		if err := tb.startKwoklets(ctx, imgs); err != nil {
			return nil, err
		}
	}
	if err := tb.writeEnv(); err != nil {
		return nil, err
	}
	if !tb.opts.SkipAgents && !testing.Testing() {
		// The deployer installs MLSysOps where a node can run the
		// continuum agent's pod; without real nodes (the scale profile,
		// --kwok-only) the agents run as processes.
		install := tb.installMLSysOps
		if !installed {
			install = tb.startAgents
		}
		if err := install(ctx); err != nil {
			return nil, fmt.Errorf("install MLSysOps: %w", err)
		}
		if err := tb.waitPlaceable(ctx, 3*time.Minute); err != nil {
			return nil, err
		}
		tb.progress("%s", "placement", "every member cluster serves the MLSysOps API")
		tb.waitDetector(ctx, 45*time.Second)
	}
	fmt.Fprintf(tb.opts.Out, "ready in %.1fs. Use it with:\n  . %s\n  kubectl --context karmada-apiserver get clusters\n",
		time.Since(start).Seconds(), tb.rel(tb.l.path("env")))
	return tb.env(), nil
}

// stopStale stops processes left by an earlier run that the current plan
// does not have, such as the components of a cluster whose description was
// removed.
func (tb *Testbed) stopStale(p *plan) error {
	want := map[string]bool{tb.northboundPIDFile(): true, tb.mlconnectorPIDFile(): true}
	for _, pr := range p.all() {
		want[pr.PIDFile] = true
	}
	for _, n := range tb.real {
		for _, pr := range tb.nodeProcesses(n) {
			want[pr.PIDFile] = true
		}
	}
	for _, k := range tb.kwokletProcesses() {
		want[k.PIDFile] = true
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
	for _, e := range tb.ejabberdNodes(true) {
		if err := e.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
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
	if err := tb.stopS3(ctx); err != nil {
		errs = append(errs, err)
	}
	tb.progress("stopped", "s3")
	if err := tb.stopPostgres(ctx); err != nil {
		errs = append(errs, err)
	}
	tb.progress("stopped", "postgres")
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

// component is one process of the testbed as Status and Signal see it.
type component struct {
	name  string
	log   string
	pid   func() (int, bool)
	ready func(context.Context) error
}

// components lists every process of the plan: control planes, services,
// real nodes' processes and kwoklets.
func (tb *Testbed) components() ([]component, error) {
	p, err := tb.prepare()
	if err != nil {
		return nil, err
	}
	pg, err := tb.newPostgres()
	if err != nil {
		return nil, err
	}
	s3, err := tb.s3()
	if err != nil {
		return nil, err
	}
	var out []component
	for _, pr := range p.all() {
		out = append(out, component{pr.Name, pr.LogFile, pr.Pid, pr.Ready})
	}
	out = append(out,
		component{"redis", tb.redis.LogFile(), tb.redis.Pid, tb.redis.Healthy},
		component{"postgres", pg.LogFile(), pg.Pid, pg.Healthy},
		component{"ejabberd", tb.ejabberd.LogFile(), tb.ejabberd.Pid, tb.ejabberd.Healthy},
	)
	for i, e := range tb.ejabberdPeers {
		out = append(out, component{fmt.Sprintf("ejabberd-%d", i+2), e.LogFile(), e.Pid, e.Healthy})
	}
	out = append(out,
		component{northboundName, tb.l.path("logs", northboundName+".log"), tb.northboundPid, tb.northboundHealthy},
		component{"s3", s3.LogFile(), s3.Pid, s3.Healthy},
	)
	if !tb.installsMLSysOps() { // installed: `go run ./deployments status` reports it
		out = append(out, component{mlconnectorName, tb.l.path("logs", mlconnectorName+".log"), tb.mlconnectorPid, tb.mlconnectorHealthy})
	}
	for _, n := range tb.real {
		for _, pr := range tb.nodeProcesses(n) {
			out = append(out, component{pr.Name, pr.LogFile, pr.Pid, pr.Ready})
		}
	}
	for _, k := range tb.kwokletProcesses() {
		// A running kwoklet is ready: it has no endpoint of its own.
		out = append(out, component{k.Name, k.LogFile, k.Pid, func(context.Context) error { return nil }})
	}
	return out, nil
}

// Status reports every component of the plan: running, pid, ready.
func (tb *Testbed) Status(ctx context.Context) ([]ComponentStatus, error) {
	cs, err := tb.components()
	if err != nil {
		return nil, err
	}
	out := make([]ComponentStatus, 0, len(cs))
	for _, c := range cs {
		out = append(out, tb.probe(ctx, c.name, c.log, c.pid, c.ready))
	}
	return out, nil
}

// Signal sends sig to one running component (a name Status reports) and
// its descendants: SIGKILL crashes it (Up starts it again), SIGSTOP
// pauses it until SIGCONT. It returns the pid signalled.
func (tb *Testbed) Signal(name string, sig syscall.Signal) (int, error) {
	cs, err := tb.components()
	if err != nil {
		return 0, err
	}
	var names []string
	for _, c := range cs {
		if c.name != name {
			names = append(names, c.name)
			continue
		}
		pid, ok := c.pid()
		if !ok {
			return 0, fmt.Errorf("%s is not running", name)
		}
		proc.SignalTree(pid, sig)
		return pid, nil
	}
	return 0, fmt.Errorf("no component %s (have %s)", name, strings.Join(names, ", "))
}

// RestartNodes names, for Restart, the described nodes: it creates those
// missing from their clusters.
const RestartNodes = "nodes"

// Restart starts one component (a name Status reports) again when it is
// not running or not ready, as Up would, without Up's pass over every
// other component and the images: a component a fault killed is back in
// seconds rather than minutes. RestartNodes creates the described nodes
// missing from their clusters.
func (tb *Testbed) Restart(ctx context.Context, name string) error {
	p, err := tb.prepare()
	if err != nil {
		return err
	}
	for _, pr := range p.all() {
		if pr.Name == name {
			return tb.startAll(ctx, []*proc.Process{pr})
		}
	}
	switch name {
	case "redis":
		return tb.redis.Start(ctx)
	case "postgres", "ejabberd":
		return tb.startXMPP(ctx)
	case northboundName:
		// Its XMPP account needs ejabberd's admin, which startXMPP
		// loads (and starts, when down).
		if err := tb.startXMPP(ctx); err != nil {
			return err
		}
		return tb.startNorthbound(ctx)
	case mlconnectorName:
		return tb.startMLConnector(ctx, tb.builtImagesAsIs(ctx))
	case RestartNodes:
		return tb.createNodes(ctx)
	}
	return fmt.Errorf("no component %s to restart", name)
}

// probe reports one component: its pid, whether it runs and, when it
// does, whether its readiness check passes within 3 s.
func (tb *Testbed) probe(ctx context.Context, name, logFile string, pid func() (int, bool), ready func(context.Context) error) ComponentStatus {
	s := ComponentStatus{Name: name, LogFile: tb.rel(logFile)}
	if s.Pid, s.Running = pid(); s.Running {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := ready(cctx); err != nil {
			s.Detail = err.Error()
		} else {
			s.Ready = true
		}
	}
	return s
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
	for _, e := range tb.ejabberdNodes(true) {
		_ = e.Kill()
	}
	if pg, err := tb.newPostgres(); err == nil {
		_ = pg.Kill()
	}
	if s3, err := tb.s3(); err == nil {
		_ = s3.Kill()
	}
	if err := killCgroup(tb.cgroupBase(), 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
