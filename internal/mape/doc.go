// Package mape is the agent's Monitor-Analyze-Plan-Execute loop.
//
// An Engine ties together the agent's telemetry sampler (monitor), its
// policies (analyze and plan) and its mechanisms (execute):
//
//   - Monitor: one telemetry.Sampler loop per agent, at the smallest
//     interval requested by the agent's configuration (monitoring_interval,
//     requester "default"), the policies (telemetry.system_scrape_interval,
//     requester "policy:<name>") and anyone else. The metrics sampled are
//     the defaults, what policies list in telemetry.metrics and the
//     applications' qos_metrics.
//   - Analyze and plan: every policy instance (one per application for
//     application-scope policies, one for global ones, which always run)
//     calls analyze every analyze_interval, and plan when analyze says so.
//     Instances run on a bounded pool of workers; one instance never runs
//     twice at once.
//   - Schedule: at every tick the queued plans are resolved per mechanism.
//     Core plans go first and are never discarded (a conflicting one waits
//     for the next tick); among the others the first plan to claim a
//     mechanism wins the tick and later ones are discarded, as are plans
//     for a mechanism still executing a plan of the same application, for
//     an application no longer managed, or for a mechanism that is not
//     enabled. Every discard is logged with its reason.
//   - Execute: each mechanism of a scheduled plan applies its command. An
//     asynchronous mechanism answers Pending and reports later
//     (mechanism.Set.OnComplete, wired to Engine.Complete); a pending plan
//     that gets no answer within the pending timeout fails. A plan is
//     Completed only when every mechanism succeeded; one failure makes it
//     Failed.
//
// Every plan is recorded in a bounded plan log (Plans, Plan) and counted in
// Prometheus metrics (plans by state, analyze and plan durations, discards
// by reason, policy errors, mechanism results). Logs use the keys app,
// policy, plan and mechanism.
//
// Applications and policies change at run time: the agent calls
// SetApplication and RemoveApplication as applications come and go, and
// the policy Watcher's events (or SetPolicy and RemovePolicy) replace
// policies while everything runs.
//
// Files: engine.go (the Engine, its applications and its run loop),
// analyze.go (policy instances: analyze and plan), schedule.go (the queue
// and its resolution per mechanism), execute.go (applying plans and their
// completions), record.go (plan records and the plan log), metrics.go,
// data.go (values for policies).
package mape
