#!/usr/bin/env bash
# Fails when a package outside agents/ (the northbound API, the ML
# connector, the deployer, commands, shared internal/ packages) depends on
# an agents/ package, directly or not. What services need from the agents'
# world (names, labels, reads through Karmada) lives in internal/ packages
# both sides import. Integration tests (test/) may test agent internals.
set -euo pipefail
cd "$(dirname "$0")/.."
module=$(go list -m)
bad=$(go list -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
	awk -v agents="$module/agents" -v tests="$module/test/" '
		index($1, agents) == 1 || index($1, tests) == 1 { next }
		{
			for (i = 2; i <= NF; i++) {
				if ($i == agents || index($i, agents "/") == 1) {
					print $1 " imports " $i
				}
			}
		}')
if [ -n "$bad" ]; then
	echo "packages outside agents/ must not import agents/ packages (move what they need to internal/):"
	echo "$bad"
	exit 1
fi

# The node-only agent (-tags nodeagent) links none of the cluster and
# continuum layers, nor the clients only they use.
heavy=$(CGO_ENABLED=0 go list -tags nodeagent -deps ./agents |
	grep -E "^($module/agents/(cluster|continuum)|k8s.io/client-go|sigs.k8s.io/controller-runtime|github.com/karmada-io|github.com/redis)(/|$)" || true)
if [ -n "$heavy" ]; then
	echo "the node-only agent (go build -tags nodeagent ./agents) links:"
	echo "$heavy" | sed 's/^/  /'
	exit 1
fi
