package testbed

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigEntry is one cluster of a kubeconfig: its name (also the
// context name), its server URL and the client certificate to use.
type kubeconfigEntry struct {
	name, server, certFile, keyFile string
}

// writeKubeconfig writes a kubeconfig with one context per entry, the data
// embedded so the file works wherever it is copied.
func writeKubeconfig(path, caFile string, current string, entries ...kubeconfigEntry) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	for _, e := range entries {
		cert, err := os.ReadFile(e.certFile)
		if err != nil {
			return err
		}
		key, err := os.ReadFile(e.keyFile)
		if err != nil {
			return err
		}
		cfg.Clusters[e.name] = &clientcmdapi.Cluster{Server: e.server, CertificateAuthorityData: ca}
		cfg.AuthInfos[e.name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
		cfg.Contexts[e.name] = &clientcmdapi.Context{Cluster: e.name, AuthInfo: e.name}
	}
	cfg.CurrentContext = current
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// restConfig loads one context of a kubeconfig file.
func restConfig(path, context string) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s context %s: %w", path, context, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}
