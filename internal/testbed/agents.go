package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Agent layers, as the agent's --layer flag names them.
const (
	LayerContinuum = "continuum"
	LayerCluster   = "cluster"
	LayerNode      = "node"
)

// AgentsConfig says how to run the agents of a description set.
type AgentsConfig struct {
	// Binary is the agent executable (see BuildAgent).
	Binary string
	// NodeBinary is the node-only agent executable the node agents run
	// (see BuildNodeAgent); empty runs Binary for them too.
	NodeBinary string
	// Descriptions is the description folder every agent reads.
	Descriptions string
	// StateDir receives pki/ (XMPP passwords, 0600), logs/, pids/ and
	// policies/<agent>/ (each agent's policy folder).
	StateDir string
	// XMPP server (comma-separated: the nodes of an ejabberd cluster),
	// domain and CA.
	XMPPAddr, XMPPDomain, XMPPCAFile string
	// XMPPAdminURL (comma-separated: every node's), XMPPAdminJID and
	// XMPPAdminPasswordFile reach ejabberd's admin API, for the accounts
	// reconciler.
	XMPPAdminURL, XMPPAdminJID, XMPPAdminPasswordFile string
	// AccountsBinary is the accounts reconciler (see BuildAccounts), which
	// creates the agents' accounts and roster links and keeps them in
	// place; AccountsListen its /metrics, /readyz and /status address.
	AccountsBinary, AccountsListen string
	// ExtraAccounts are further accounts it keeps, "jid=password-file".
	ExtraAccounts []string
	// AccountsArgs are added to its command line.
	AccountsArgs []string
	// Redis server and password; with RedisMode sentinel, RedisAddr lists
	// the sentinels (comma-separated), with cluster some of the nodes.
	RedisAddr, RedisPassword string
	// RedisMode is single (empty), sentinel or cluster; RedisMasterName
	// and RedisSentinelPassword go with sentinel.
	RedisMode, RedisMasterName, RedisSentinelPassword string
	// RedisPrefix starts every key; empty keeps the agents' default.
	RedisPrefix string
	// RedisUserDir, when set, holds the password of each component's
	// Redis ACL user (RedisUserPasswordFile): the continuum and cluster
	// agents log in as their own user (state.ACLUserName, allowed only
	// state.ACLRules with the default prefix, so not with RedisPrefix)
	// instead of the default user, as installed agents do.
	RedisUserDir string
	// Kubeconfig has the karmada-apiserver context and one context per
	// member cluster.
	Kubeconfig string
	// ListenBase is the port of the first agent's /metrics and /status;
	// the others follow. Zero disables the servers.
	ListenBase int
	// Args are added to every agent's command line.
	Args []string
	// Replicas, when above 1, runs the continuum and every cluster agent
	// as that many replicas with leader election (--leader-elect, one
	// --leader-elect-identity each, <name>-<replica>); ReplicaArgs are
	// added to their command lines (the lease timings, say).
	Replicas    int
	ReplicaArgs []string
	// Env is added to every agent's environment.
	Env []string
}

// AgentProcess is one agent of the testbed.
type AgentProcess struct {
	*proc.Process
	Layer  string
	Name   string
	JID    string
	Parent string // parent's JID; empty for the continuum
	// Listen is the /metrics, /healthz, /readyz and /status address.
	Listen string
	// PolicyDir is the agent's policy folder.
	PolicyDir string
	// Replica numbers the replicas of an elected agent (AgentsConfig.Replicas),
	// from 0; Identity is its name in the Lease, empty without election.
	Replica  int
	Identity string
}

// URL returns the agent's HTTP base URL, or "" when it serves none.
func (a *AgentProcess) URL() string {
	if a.Listen == "" {
		return ""
	}
	return "http://" + a.Listen
}

// agentJID is the agent's own JID (agentconfig.AgentJID).
func agentJID(layer, name, domain string) string {
	return agentconfig.AgentJID(agentconfig.Layer(layer), name, domain)
}

// BuildAgent builds the agent binary, which runs every layer, from the
// checkout at root into out.
func BuildAgent(ctx context.Context, root, out string) error {
	return goBuild(ctx, root, nil, "-o", out, "./agents")
}

// BuildAccounts builds the accounts reconciler, mlsysops-accounts, from
// the checkout at root into out.
func BuildAccounts(ctx context.Context, root, out string) error {
	return goBuild(ctx, root, nil, "-o", out, "./cmd/mlsysops-accounts")
}

// BuildNodeAgent builds the node-only agent from the checkout at root into
// out, as `make build` does: the nodeagent tag leaves out the cluster and
// continuum layers, and without cgo the binary is static, so that no C
// library is mapped into each node agent either.
func BuildNodeAgent(ctx context.Context, root, out string) error {
	return goBuild(ctx, root, []string{"CGO_ENABLED=0"}, "-tags", "nodeagent", "-o", out, "./agents")
}

// BuildRaceAgents builds both agents with the race detector: a process
// that races prints a report and exits with status 66. The race detector
// needs cgo, so the node-only agent is not static here.
func BuildRaceAgents(ctx context.Context, root, full, node string) error {
	if err := goBuild(ctx, root, nil, "-race", "-o", full, "./agents"); err != nil {
		return err
	}
	return goBuild(ctx, root, []string{"CGO_ENABLED=1"}, "-race", "-tags", "nodeagent", "-o", node, "./agents")
}

func goBuild(ctx context.Context, root string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		line := append(append(append([]string(nil), env...), "go", "build"), args...)
		return fmt.Errorf("%s: %w\n%s", strings.Join(line, " "), err, b)
	}
	return nil
}

// PlanAgents returns the continuum agent, one cluster agent per cluster and
// one node agent per node of the set, in start order.
func PlanAgents(set *description.Set, cfg AgentsConfig) ([]*AgentProcess, error) {
	if set.Continuum == nil {
		return nil, fmt.Errorf("descriptions in %s: no continuum description", cfg.Descriptions)
	}
	var out []*AgentProcess
	add := func(layer, name, parent string, extra ...string) {
		n := 1
		if layer != LayerNode && cfg.Replicas > 1 {
			n = cfg.Replicas
		}
		for r := 0; r < n; r++ {
			a := &AgentProcess{Layer: layer, Name: name, JID: agentJID(layer, name, cfg.XMPPDomain), Parent: parent,
				PolicyDir: filepath.Join(cfg.StateDir, "policies", layer+"-"+name), Replica: r}
			if cfg.ListenBase > 0 {
				a.Listen = "127.0.0.1:" + strconv.Itoa(cfg.ListenBase+len(out))
			}
			args := extra
			if n > 1 {
				a.Identity = name + "-" + strconv.Itoa(r)
				args = append(append(slices.Clip(extra), "--leader-elect", "--leader-elect-identity", a.Identity), cfg.ReplicaArgs...)
			}
			out = append(out, a)
			a.Process = cfg.process(a, args)
		}
	}
	cont := set.Continuum.Name
	contJID := agentJID(LayerContinuum, cont, cfg.XMPPDomain)
	// Each agent reports refused logins as Events in its own cluster: the
	// host cluster for the continuum, its member cluster for the others.
	events := func(context string) []string {
		return []string{"--events-kubeconfig", cfg.Kubeconfig, "--events-context", context}
	}
	add(LayerContinuum, cont, "", append(events(ContextHost), "--karmada-kubeconfig", cfg.Kubeconfig, "--karmada-context", ContextKarmada)...)
	for _, c := range set.Clusters {
		add(LayerCluster, c.Name, contJID, append(events(c.Name), "--kubeconfig", cfg.Kubeconfig, "--kube-context", c.Name, "--continuum-name", cont)...)
	}
	for _, n := range set.Nodes {
		add(LayerNode, n.Name, agentJID(LayerCluster, n.Spec.ClusterID, cfg.XMPPDomain), append(events(n.Spec.ClusterID), "--continuum-name", cont)...)
	}
	return out, nil
}

func (cfg AgentsConfig) process(a *AgentProcess, extra []string) *proc.Process {
	id := "agent-" + a.Layer + "-" + a.Name
	if a.Identity != "" {
		id = "agent-" + a.Layer + "-" + a.Identity
	}
	args := []string{
		"--layer", a.Layer, "--node-name", a.Name,
		"--descriptions", cfg.Descriptions, "--policy-directory", a.PolicyDir,
		"--install-path", filepath.Join(cfg.StateDir, "agents"),
		"--xmpp-server", cfg.XMPPAddr, "--xmpp-domain", cfg.XMPPDomain, "--xmpp-ca-file", cfg.XMPPCAFile,
		"--xmpp-password-file", cfg.passwordFile(a.JID),
		"--listen", a.Listen, "--log-format", "json",
	}
	if a.Layer != LayerNode {
		// The users' key patterns are the default prefix's.
		if comp, ok := redisComponent[a.Layer]; ok && cfg.RedisUserDir != "" && cfg.RedisPrefix == "" {
			args = append(args, "--redis-addr", cfg.RedisAddr, "--redis-username", state.ACLUserName(comp), "--redis-password-file", RedisUserPasswordFile(cfg.RedisUserDir, comp))
		} else {
			args = append(args, "--redis-addr", cfg.RedisAddr, "--redis-password-file", cfg.redisPasswordFile())
		}
		if cfg.RedisMode != "" {
			args = append(args, "--redis-mode", cfg.RedisMode)
		}
		if cfg.RedisMasterName != "" {
			args = append(args, "--redis-master-name", cfg.RedisMasterName)
		}
		if cfg.RedisSentinelPassword != "" {
			args = append(args, "--redis-sentinel-password-file", cfg.redisSentinelPasswordFile())
		}
		if cfg.RedisPrefix != "" {
			args = append(args, "--redis-prefix", cfg.RedisPrefix)
		}
	}
	args = append(args, extra...)
	args = append(args, cfg.Args...)
	p := &proc.Process{
		Name: id, Path: cfg.binaryFor(a.Layer), Args: args, Env: cfg.Env, Dir: filepath.Join(cfg.StateDir, "agents"),
		LogFile: filepath.Join(cfg.StateDir, "logs", id+".log"), PIDFile: filepath.Join(cfg.StateDir, "pids", id+".pid"),
	}
	if a.Listen != "" {
		p.Ready = httpReady("http://" + a.Listen + "/readyz")
	} else {
		p.Ready = func(context.Context) error { return nil }
	}
	return p
}

// redisComponent is the Redis ACL user's component of each layer that
// uses Redis.
var redisComponent = map[string]state.Component{LayerContinuum: state.ComponentContinuum, LayerCluster: state.ComponentCluster}

// binaryFor is the executable of an agent of layer.
func (cfg AgentsConfig) binaryFor(layer string) string {
	if layer == LayerNode && cfg.NodeBinary != "" {
		return cfg.NodeBinary
	}
	return cfg.Binary
}

func (cfg AgentsConfig) passwordFile(jid string) string {
	return filepath.Join(cfg.StateDir, "pki", provision.PasswordFileName(jid))
}

func (cfg AgentsConfig) redisPasswordFile() string {
	return filepath.Join(cfg.StateDir, "pki", "agents-redis.password")
}

func (cfg AgentsConfig) redisSentinelPasswordFile() string {
	return filepath.Join(cfg.StateDir, "pki", "agents-redis-sentinel.password")
}

// PrepareAgents makes the folders the agents use (pki/, logs/, pids/,
// agents/ and each policy folder) and writes the Redis password file they
// read. Their XMPP accounts are the accounts reconciler's (StartAccounts).
func PrepareAgents(cfg AgentsConfig, agents []*AgentProcess) error {
	for _, d := range []string{"pki", "logs", "pids", "agents"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(cfg.redisPasswordFile(), []byte(cfg.RedisPassword), 0o600); err != nil {
		return err
	}
	if cfg.RedisSentinelPassword != "" {
		if err := os.WriteFile(cfg.redisSentinelPasswordFile(), []byte(cfg.RedisSentinelPassword), 0o600); err != nil {
			return err
		}
	}
	for _, a := range agents {
		if err := os.MkdirAll(a.PolicyDir, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// AccountsProcess is the accounts reconciler of cfg's agents: it creates
// their accounts with generated passwords (0600 files in <state>/pki, which
// the agents read), links each parent and child in their rosters, and keeps
// both in place while it runs: after ejabberd restarts, periodically, and
// when an agent reports through a Kubernetes Event that it cannot log in.
func AccountsProcess(cfg AgentsConfig) *proc.Process {
	args := []string{
		"--descriptions", cfg.Descriptions, "--xmpp-domain", cfg.XMPPDomain,
		"--password-dir", filepath.Join(cfg.StateDir, "pki"), "--generate-passwords",
		"--admin-url", cfg.XMPPAdminURL, "--admin-jid", cfg.XMPPAdminJID,
		"--admin-password-file", cfg.XMPPAdminPasswordFile, "--admin-ca-file", cfg.XMPPCAFile,
		"--listen", cfg.AccountsListen, "--log-format", "json",
		// Reports of the continuum agent arrive on the host cluster, those
		// of the others in their member clusters, read through Karmada's
		// cluster proxy as an installation reads them.
		"--kubeconfig", cfg.Kubeconfig, "--event-contexts", ContextHost,
		"--karmada-context", ContextKarmada, "--karmada-clusters", "*",
	}
	for _, a := range cfg.ExtraAccounts {
		args = append(args, "--account", a)
	}
	args = append(args, cfg.AccountsArgs...)
	return &proc.Process{
		Name: accountsName, Path: cfg.AccountsBinary, Args: args, Dir: cfg.StateDir,
		LogFile: filepath.Join(cfg.StateDir, "logs", accountsName+".log"), PIDFile: filepath.Join(cfg.StateDir, "pids", accountsName+".pid"),
		Ready: httpReady("http://" + cfg.AccountsListen + "/readyz"),
	}
}

// accountsName names the accounts reconciler's process, log and pid file.
const accountsName = "accounts"

// StartAccounts starts the accounts reconciler unless it runs with the
// same command line, and waits until its first full pass succeeded: then
// every account exists with the password its file holds.
func StartAccounts(ctx context.Context, cfg AgentsConfig) (*proc.Process, error) {
	p := AccountsProcess(cfg)
	if _, ok := p.Pid(); ok && !p.SameCommand() {
		if err := p.Stop(10 * time.Second); err != nil {
			return nil, err
		}
	}
	if _, ok := p.Pid(); !ok {
		if err := p.Start(); err != nil {
			return nil, err
		}
	}
	if err := waitAccounts(ctx, p, "http://"+cfg.AccountsListen+"/metrics", accountsStall); err != nil {
		return nil, fmt.Errorf("accounts reconciler: %w; see %s:\n%s", err, p.LogFile, proc.Tail(p.LogFile, 15))
	}
	return p, nil
}

// accountsStall is how long the first pass of the accounts reconciler may
// go without creating or checking an account before StartAccounts gives
// up.
const accountsStall = 2 * time.Minute

// waitAccounts waits until the reconciler is ready, for as long as its
// first pass makes progress: a pass over a thousand agents' accounts
// takes minutes on a loaded machine (three admin API calls each), a fixed
// deadline would fail it half way; a pass that stops creating and
// checking accounts for stall has failed.
func waitAccounts(ctx context.Context, p *proc.Process, metricsURL string, stall time.Duration) error {
	last, since := -1.0, time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := p.WaitReady(wctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if n := accountsWork(ctx, metricsURL); n > last {
			last, since = n, time.Now()
		} else if time.Since(since) > stall {
			return fmt.Errorf("no account created or checked for %v (%.0f so far): %w", stall, max(last, 0), err)
		}
	}
}

// accountsWork is what the reconciler has done so far: the accounts it
// checked (and created) and its failed admin API calls, read from its
// /metrics; -1 when it cannot be read.
func accountsWork(ctx context.Context, url string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if name != "mlsysops_accounts_checked_total" && name != "mlsysops_accounts_errors_total" {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// StartAgents starts the agents that are not running with their current
// command line, layer by layer, waiting for each layer to be ready.
func StartAgents(ctx context.Context, agents []*AgentProcess, progress func(name, msg string)) error {
	for _, layer := range []string{LayerContinuum, LayerCluster, LayerNode} {
		var started []*AgentProcess
		for _, a := range agents {
			if a.Layer != layer {
				continue
			}
			if _, ok := a.Pid(); ok && a.SameCommand() {
				continue
			}
			if _, ok := a.Pid(); ok {
				if err := a.Stop(10 * time.Second); err != nil {
					return err
				}
			}
			if err := a.Start(); err != nil {
				return fmt.Errorf("start %s: %w", a.Process.Name, err)
			}
			started = append(started, a)
		}
		for _, a := range started {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := a.WaitReady(wctx)
			cancel()
			if err != nil {
				return err
			}
			if progress != nil {
				progress(a.Process.Name, fmt.Sprintf("ready (%s, %s)", a.JID, a.Listen))
			}
		}
	}
	return nil
}

// agents plans the agents of a testbed without real nodes (the scale
// profile), which run as processes: nothing could run the continuum
// agent's pod (see installMLSysOps). The binary in <bin>, accounts through
// the testbed's ejabberd, its Redis and kubeconfig.
func (tb *Testbed) agents() ([]*AgentProcess, AgentsConfig, error) {
	cfg := AgentsConfig{
		Binary: filepath.Join(tb.opts.BinDir, agentBinary), NodeBinary: filepath.Join(tb.opts.BinDir, nodeAgentBinary), Descriptions: tb.opts.Descriptions, StateDir: tb.l.state,
		XMPPAddr: tb.ejabberd.C2SAddr(), XMPPDomain: tb.ejabberd.Domain(), XMPPCAFile: tb.ejabberd.CAFile(),
		XMPPAdminURL: tb.ejabberd.APIURL(), XMPPAdminJID: tb.ejabberd.AdminJID(), XMPPAdminPasswordFile: tb.ejabberd.AdminPasswordFile(),
		AccountsBinary: filepath.Join(tb.opts.BinDir, accountsBinary), AccountsListen: tb.l.addr(portAccounts),
		ExtraAccounts: []string{northboundXMPPUser + "@" + tb.ejabberd.Domain() + "=" + tb.northboundPasswordFile()},
		RedisAddr:     tb.redis.Addr(), RedisPassword: tb.redis.Password(), RedisUserDir: tb.l.path("pki"), Kubeconfig: tb.l.path("kubeconfig"),
		ListenBase: tb.l.port(portAgents),
		// The northbound API pings agents and sets their mode.
		Args: append([]string{"--xmpp-controllers", northboundXMPPUser + "@" + tb.ejabberd.Domain()}, tb.settings().agentArgs...),
	}
	if !tb.settings().nodeAgents {
		// Accounts for the agents that run: thousands of node accounts
		// nothing logs in with would be most of ejabberd's start-up.
		cfg.AccountsArgs = []string{"--layers", LayerContinuum + "," + LayerCluster}
	}
	as, err := PlanAgents(tb.set, cfg)
	if err != nil || tb.settings().nodeAgents {
		return as, cfg, err
	}
	// The profile runs no node agents.
	kept := as[:0]
	for _, a := range as {
		if a.Layer != LayerNode {
			kept = append(kept, a)
		}
	}
	return kept, cfg, nil
}

// portAgents is the first process agent's HTTP port offset; agents take
// the ports up to portMembers.
const portAgents = 50

// startAgents builds the agent binaries and starts the agents of a testbed
// without real nodes as processes (see agents).
func (tb *Testbed) startAgents(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	as, cfg, err := tb.agents()
	if err != nil {
		return err
	}
	if len(as) > portMembers-portAgents {
		return fmt.Errorf("%d agents: the testbed gives agents %d ports", len(as), portMembers-portAgents)
	}
	for _, b := range []struct {
		build func(context.Context, string, string) error
		out   string
	}{{BuildAgent, cfg.Binary}, {BuildNodeAgent, cfg.NodeBinary}, {BuildAccounts, cfg.AccountsBinary}} {
		if err := b.build(ctx, root, b.out); err != nil {
			return err
		}
	}
	if err := PrepareAgents(cfg, as); err != nil {
		return err
	}
	if _, err := StartAccounts(ctx, cfg); err != nil {
		return err
	}
	tb.progress("ready on http://%s: %d agent accounts kept in place, passwords in %s", accountsName, cfg.AccountsListen, len(as), tb.rel(tb.l.path("pki")))
	return StartAgents(ctx, as, func(name, msg string) { tb.progress("%s", name, msg) })
}

// The agent executables the testbed builds for the tests' agents, as
// `make build` does, and the accounts reconciler's.
const (
	agentBinary     = "mlsysops-agent"
	nodeAgentBinary = "mlsysops-agent-node"
	accountsBinary  = "mlsysops-accounts"
)
