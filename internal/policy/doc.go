// Package policy runs MLSysOps policies written in Starlark.
//
// A policy is a file policy-<name>.star that defines three functions, the
// upstream contract with Starlark for Python:
//
//	def initialize():
//	    return {
//	        "scope": "application",              # or "global"
//	        "configuration": {"analyze_interval": "10s"},  # "0" runs once
//	        "telemetry": {"metrics": ["node_load1"], "system_scrape_interval": "5s"},
//	        "mechanisms": ["fluidity"],
//	        "core": False,
//	        # ...anything else the policy wants to keep in its context
//	    }
//
//	def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
//	    return True, context                     # (plan needed?, context)
//
//	def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
//	    return {"fluidity": {...}}, context      # keys are mechanism names
//
// initialize's dict becomes the instance's context, which analyze and plan
// receive and return; it is the only state a policy keeps (module globals
// are frozen after loading). application_description is a list: the one
// application for application-scope policies, every application for
// global ones. mechanisms maps each enabled mechanism to {"state": ...,
// "options": ...}. telemetry is an object with latest(name, default=None,
// labels=None), query(name, seconds=60, labels=None), select(name,
// labels=None) and metrics(); telemetry["node_load1"] is the latest value
// or None. ml_connector is the ML connector's URL or None.
//
// Helpers are predeclared: now() (seconds since the epoch), log(*args,
// level="info", **fields) and print() (to the agent's slog logger),
// parse_duration("5m") (seconds), metric(telemetry, name, default=None,
// **labels), json.encode/json.decode/json.indent and math. There is no
// load(), no file, network or process access: a policy only computes.
// while loops and recursion are allowed, but every call is bounded by a
// number of execution steps and a wall-clock limit; a policy that exceeds
// either is stopped with an error naming the file and line it was at.
//
// A Watcher loads policies from a folder (usually a ConfigMap mount) and
// reloads them when files are created, changed or removed, including the
// ..data symlink swap with which Kubernetes updates ConfigMap volumes. A
// file that does not compile, or whose initialize fails or returns a bad
// configuration, is reported with file:line and the previous version keeps
// running. Built-in policies (Builtins) keep an agent working with an empty
// folder; a user policy of the same name replaces the built-in one.
package policy
