package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads a kubeconfig's context the way kubectl does: an empty
// path follows $KUBECONFIG and ~/.kube/config, and falls back to the
// in-cluster configuration; an empty context is the current one. Agents
// talk to one API server at a time and burst when they reconcile, so the
// client's rate limits are raised above client-go's defaults.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// Protobuf returns a copy of cfg for client-go's clientsets of the
// built-in kinds that speaks protobuf, as controller-runtime's client does
// for them already: a watch of pods or nodes in a busy cluster costs the
// agent several times less to decode, and the API server no JSON
// serialization of its events when no other watcher asks for JSON.
// Never for custom resources, which the API server serves in JSON only.
func Protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// Readyz asks the API server at cfg whether it is ready; the error names
// the server as what (e.g. "karmada API").
func Readyz(ctx context.Context, cfg *rest.Config, what string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
