package deployer

import (
	"context"
	"fmt"

	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is one API the deployer writes to: the host cluster or the
// Karmada API.
type Cluster struct {
	// Name is "host" or "karmada", for messages.
	Name   string
	Config *rest.Config
	Kube   kubernetes.Interface
	Dyn    dynamic.Interface
	Mapper *restmapper.DeferredDiscoveryRESTMapper
}

// Clusters are the two APIs of an installation.
type Clusters struct {
	Host, Karmada *Cluster
	// KarmadaClient reads Karmada's own objects (clusters, bindings).
	KarmadaClient karmadaclientset.Interface
}

// NewCluster builds the clients of one API.
func NewCluster(name string, cfg *rest.Config) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s API client: %w", name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s API client: %w", name, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s API discovery: %w", name, err)
	}
	return &Cluster{Name: name, Config: cfg, Kube: kc, Dyn: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Connect builds the clients of both APIs from the options'
// kubeconfigs, and checks that both answer.
func Connect(ctx context.Context, o *Options) (*Clusters, error) {
	hostCfg, karmadaCfg, err := o.RestConfigs()
	if err != nil {
		return nil, err
	}
	host, err := NewCluster("host", hostCfg)
	if err != nil {
		return nil, err
	}
	karmada, err := NewCluster("karmada", karmadaCfg)
	if err != nil {
		return nil, err
	}
	kc, err := karmadaclientset.NewForConfig(karmada.Config)
	if err != nil {
		return nil, err
	}
	for _, c := range []*Cluster{host, karmada} {
		if _, err := c.Kube.Discovery().ServerVersion(); err != nil {
			return nil, fmt.Errorf("the %s API at %s does not answer: %w", c.Name, c.Config.Host, err)
		}
	}
	if _, err := karmada.Mapper.RESTMapping(clusterGK); err != nil {
		return nil, fmt.Errorf("the Karmada API at %s has no cluster.karmada.io Cluster kind (is it the Karmada API and not the host cluster?): %w", karmada.Config.Host, err)
	}
	return &Clusters{Host: host, Karmada: karmada, KarmadaClient: kc}, nil
}

// RestConfigs resolves the host and Karmada configurations: the two
// kubeconfigs (KARMADA_HOST_KUBECONFIG, KARMADA_API_KUBECONFIG) with their
// current or named contexts, else KUBECONFIG's contexts karmada-host and
// karmada-apiserver.
func (o *Options) RestConfigs() (host, karmada *rest.Config, err error) {
	load := func(file, context string) (*rest.Config, error) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if file != "" {
			rules.ExplicitPath = file
		}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
		if err != nil {
			where := file
			if where == "" {
				where = "$KUBECONFIG or ~/.kube/config"
			}
			if context != "" {
				return nil, fmt.Errorf("kubeconfig %s, context %q: %w", where, context, err)
			}
			return nil, fmt.Errorf("kubeconfig %s: %w", where, err)
		}
		return cfg, nil
	}
	if o.HostKubeconfig != "" && o.KarmadaKubeconfig != "" {
		if host, err = load(o.HostKubeconfig, o.HostContext); err != nil {
			return nil, nil, fmt.Errorf("host cluster: %w", err)
		}
		if karmada, err = load(o.KarmadaKubeconfig, o.KarmadaContext); err != nil {
			return nil, nil, fmt.Errorf("Karmada API: %w", err)
		}
		return host, karmada, nil
	}
	hc, kc := o.HostContext, o.KarmadaContext
	if hc == "" {
		hc = DefaultHostContext
	}
	if kc == "" {
		kc = DefaultKarmadaContext
	}
	if host, err = load(o.Kubeconfig, hc); err != nil {
		return nil, nil, fmt.Errorf("host cluster: %w", err)
	}
	if karmada, err = load(o.Kubeconfig, kc); err != nil {
		return nil, nil, fmt.Errorf("Karmada API: %w", err)
	}
	return host, karmada, nil
}

// mapping returns the REST mapping of an object's kind, refreshing the
// discovery cache once when the kind is unknown (a CRD just applied).
func (c *Cluster) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		c.Mapper.Reset()
		m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}
