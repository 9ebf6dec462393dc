package mape_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/policy"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// forwarder stands for the agent's XMPP link to its cluster agent.
type forwarder struct{}

func (forwarder) Forward(ctx context.Context, planID string, command map[string]any) error {
	return nil // the agent sends message_to_fluidity here
}

// Example shows how a node agent wires the libraries together.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()

	// Configuration: defaults < config file < MLSYSOPS_* env < flags.
	opts, warnings, err := agentconfig.Load(os.Args[1:], nil)
	if err != nil {
		log.Error("bad configuration", "err", err)
		return
	}
	for _, w := range warnings {
		log.Warn(w.String())
	}

	// Monitor: one sampler, fed by the node's own telemetry.
	node := telemetry.NewNodeCollector(telemetry.NodeOptions{ProcRoot: opts.ProcfsRoot, SysRoot: opts.SysfsRoot, NvidiaSMI: opts.NvidiaSMI})
	sampler := telemetry.NewSampler(telemetry.SamplerOptions{Interval: opts.MonitoringInterval, Logger: log})
	sampler.AddSource(node)
	_ = node.Register(reg)
	_ = sampler.Register(reg)

	// Mechanisms: the enabled ones, with the node's permitted_actions.
	mechanisms, err := mechanism.NewBuiltinRegistry().Build(opts.EnabledMechanisms(), mechanism.Env{
		Logger:      log,
		Node:        opts.NodeName,
		Permissions: mechanism.NewPermissions([]string{"cpu_frequency"}), // from the MLSysOpsNode description
		SysfsRoot:   opts.SysfsRoot,
		NvidiaSMI:   opts.NvidiaSMI,
		Forwarder:   forwarder{},
	})
	if err != nil {
		log.Error("mechanisms", "err", err)
		return
	}
	defer mechanisms.Close()

	// Policies: built-in ones for the layer, and the hot-reloaded folder.
	rt := policy.Runtime{Limits: policy.Limits{MaxSteps: opts.PolicyMaxSteps, Timeout: opts.PolicyTimeout}, Logger: log}
	builtins, err := policy.Builtins(ctx, string(opts.Layer), rt)
	if err != nil {
		log.Error("built-in policies", "err", err)
		return
	}
	watcher := policy.NewWatcher(policy.WatcherOptions{Dir: opts.PolicyDirectory, Builtins: builtins, Runtime: rt, PollInterval: opts.PolicyPollInterval, Logger: log})

	engine, err := mape.New(mape.Config{
		Layer:              string(opts.Layer),
		Logger:             log,
		Mechanisms:         mechanisms,
		Sampler:            sampler,
		MonitoringInterval: opts.MonitoringInterval,
		DefaultMetrics:     opts.DefaultTelemetryMetrics,
		Policies:           watcher,
		PlanLogSize:        opts.PlanLogSize,
		PendingTimeout:     opts.PendingTimeout,
		Registerer:         reg,
	})
	if err != nil {
		log.Error("engine", "err", err)
		return
	}
	engine.SetSystemDescription(map[string]any{"MLSysOpsNode": map[string]any{"name": opts.NodeName}})
	// The messaging layer then feeds applications as they are placed:
	_ = engine.SetApplication(ctx, mape.Application{ID: "demo", Description: map[string]any{"name": "demo", "component_name": "server"}})
	// ... and reports results of forwarded plans:
	//   proxy.(*mechanism.FluidityProxy).HandleUpdate(payload)
	_ = engine.Run(ctx)
}
