//go:build !nodeagent

package main

// The full build runs every layer; the node-only build (-tags nodeagent)
// leaves these two out, and with them the Kubernetes, controller-runtime,
// Karmada and Redis clients.
import (
	_ "github.com/mlsysops-go/mlsysops/agents/cluster"
	_ "github.com/mlsysops-go/mlsysops/agents/continuum"
	_ "github.com/mlsysops-go/mlsysops/agents/election"
)
