// Package mechanism holds the agent's mechanisms: the Go code that carries
// out the parts of a plan. A plan is a map from mechanism name to a
// command; the MAPE engine hands each command to the mechanism registered
// under that name.
//
// Mechanisms are registered by name in a Registry (Register(name,
// factory)) and enabled by configuration: Registry.Build makes a Set of the
// named ones. Each Mechanism applies commands (Apply), reports its state
// and its options to policies (State, Options). Apply either finishes the
// work (StatusSuccess), fails (an error), or starts work whose outcome
// comes later (StatusPending); an asynchronous mechanism then reports the
// outcome through Env.Complete, which the Set routes to whoever called
// OnComplete (the MAPE engine).
//
// This package implements the node mechanisms:
//
//   - CPUFrequencyConfigurator: Linux cpufreq through sysfs (governor,
//     minimum and maximum frequency per CPU), with the upstream command
//     shape {"command": "set", "cpu": "all", "frequency": "max"}.
//   - GPUConfigurator: NVIDIA power limits and application clocks through
//     nvidia-smi.
//   - fluidity_proxy: forwards a node's plan to its cluster agent and
//     completes when the cluster reports the plan executed.
//
// Node mechanisms refuse what the node's permitted_actions (from its
// MLSysOpsNode description) do not allow.
package mechanism
