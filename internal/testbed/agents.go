package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
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
	// XMPP server, domain and CA.
	XMPPAddr, XMPPDomain, XMPPCAFile string
	// Provisioner creates the accounts and roster links.
	Provisioner provision.Provisioner
	// Redis server and password.
	RedisAddr, RedisPassword string
	// RedisPrefix starts every key; empty keeps the agents' default.
	RedisPrefix string
	// Kubeconfig has the karmada-apiserver context and one context per
	// member cluster.
	Kubeconfig string
	// ListenBase is the port of the first agent's /metrics and /status;
	// the others follow. Zero disables the servers.
	ListenBase int
	// Args are added to every agent's command line.
	Args []string
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
}

// URL returns the agent's HTTP base URL, or "" when it serves none.
func (a *AgentProcess) URL() string {
	if a.Listen == "" {
		return ""
	}
	return "http://" + a.Listen
}

// agentJID mirrors the agent's own JID scheme (agents/agent.AgentJID):
// nodes use their host name, the other layers add theirs, because a cluster
// agent's host is named like its cluster.
func agentJID(layer, name, domain string) string {
	switch layer {
	case LayerCluster:
		return name + ".cluster@" + domain
	case LayerContinuum:
		return name + ".continuum@" + domain
	}
	return name + "@" + domain
}

// BuildAgent builds the agent binary, which runs every layer, from the
// checkout at root into out.
func BuildAgent(ctx context.Context, root, out string) error {
	return goBuild(ctx, root, nil, "-o", out, "./agents")
}

// BuildNodeAgent builds the node-only agent from the checkout at root into
// out, as `make build` does: the nodeagent tag leaves out the cluster and
// continuum layers, and without cgo the binary is static, so that no C
// library is mapped into each node agent either.
func BuildNodeAgent(ctx context.Context, root, out string) error {
	return goBuild(ctx, root, []string{"CGO_ENABLED=0"}, "-tags", "nodeagent", "-o", out, "./agents")
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
		a := &AgentProcess{Layer: layer, Name: name, JID: agentJID(layer, name, cfg.XMPPDomain), Parent: parent,
			PolicyDir: filepath.Join(cfg.StateDir, "policies", layer+"-"+name)}
		if cfg.ListenBase > 0 {
			a.Listen = "127.0.0.1:" + strconv.Itoa(cfg.ListenBase+len(out))
		}
		out = append(out, a)
		a.Process = cfg.process(a, extra)
	}
	cont := set.Continuum.Name
	contJID := agentJID(LayerContinuum, cont, cfg.XMPPDomain)
	add(LayerContinuum, cont, "", "--karmada-kubeconfig", cfg.Kubeconfig, "--karmada-context", ContextKarmada)
	for _, c := range set.Clusters {
		add(LayerCluster, c.Name, contJID, "--kubeconfig", cfg.Kubeconfig, "--kube-context", c.Name, "--continuum-name", cont)
	}
	for _, n := range set.Nodes {
		add(LayerNode, n.Name, agentJID(LayerCluster, n.Spec.ClusterID, cfg.XMPPDomain), "--continuum-name", cont)
	}
	return out, nil
}

func (cfg AgentsConfig) process(a *AgentProcess, extra []string) *proc.Process {
	id := "agent-" + a.Layer + "-" + a.Name
	args := []string{
		"--layer", a.Layer, "--node-name", a.Name,
		"--descriptions", cfg.Descriptions, "--policy-directory", a.PolicyDir,
		"--install-path", filepath.Join(cfg.StateDir, "agents"),
		"--xmpp-server", cfg.XMPPAddr, "--xmpp-domain", cfg.XMPPDomain, "--xmpp-ca-file", cfg.XMPPCAFile,
		"--xmpp-password-file", cfg.passwordFile(a.JID),
		"--listen", a.Listen, "--log-format", "json",
	}
	if a.Layer != LayerNode {
		args = append(args, "--redis-addr", cfg.RedisAddr, "--redis-password-file", cfg.redisPasswordFile())
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

// binaryFor is the executable of an agent of layer.
func (cfg AgentsConfig) binaryFor(layer string) string {
	if layer == LayerNode && cfg.NodeBinary != "" {
		return cfg.NodeBinary
	}
	return cfg.Binary
}

func (cfg AgentsConfig) passwordFile(jid string) string {
	return filepath.Join(cfg.StateDir, "pki", "xmpp-"+strings.ReplaceAll(jid, "@", "_at_")+".password")
}

func (cfg AgentsConfig) redisPasswordFile() string {
	return filepath.Join(cfg.StateDir, "pki", "agents-redis.password")
}

// ProvisionAgents creates (or keeps) every agent's XMPP account with a
// generated password stored 0600 under <state>/pki, links each parent and
// child in their rosters, and writes the Redis password file the agents
// read.
func ProvisionAgents(ctx context.Context, cfg AgentsConfig, agents []*AgentProcess) error {
	for _, d := range []string{"pki", "logs", "pids", "agents"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(cfg.redisPasswordFile(), []byte(cfg.RedisPassword), 0o600); err != nil {
		return err
	}
	for _, a := range agents {
		if err := os.MkdirAll(a.PolicyDir, 0o755); err != nil {
			return err
		}
		file := cfg.passwordFile(a.JID)
		pw := ""
		if b, err := os.ReadFile(file); err == nil {
			pw = strings.TrimSpace(string(b))
		}
		if pw == "" {
			var err error
			if pw, err = provision.GeneratePassword(); err != nil {
				return err
			}
		}
		if err := cfg.Provisioner.EnsureAccount(ctx, a.JID, pw); err != nil {
			return fmt.Errorf("XMPP account of %s: %w", a.Name, err)
		}
		if err := os.WriteFile(file, []byte(pw), 0o600); err != nil {
			return err
		}
	}
	for _, a := range agents {
		if a.Parent == "" {
			continue
		}
		if err := cfg.Provisioner.Link(ctx, a.Parent, a.JID); err != nil {
			return fmt.Errorf("roster link %s <-> %s: %w", a.Parent, a.JID, err)
		}
	}
	return nil
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
