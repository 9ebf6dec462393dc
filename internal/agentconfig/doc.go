// Package agentconfig reads the configuration of an MLSysOps agent.
//
// An agent takes its options from, in increasing order of precedence:
// built-in defaults, an optional YAML file in the upstream format
// (config.yaml with mechanisms, policy_directory, continuum_layer,
// monitoring_interval, default_telemetry_metrics, behaviours, ...),
// environment variables and command-line flags. Load applies all four and
// returns the resulting Options together with warnings about keys that were
// ignored; Options.Validate lists every problem with its key path.
//
// Upstream files load unchanged: unknown keys, and upstream keys the Go
// agent does not use, produce warnings rather than errors, while values of
// the wrong type are errors naming the key (behaviours.Subscribe.enabled:
// want a boolean, got "sometimes"). The file is found the upstream way:
// CONFIG_PATH, else <MLSYSOPS_INSTALL_PATH>/config/<node>-config.yaml, else
// config.yaml in the working directory.
package agentconfig
