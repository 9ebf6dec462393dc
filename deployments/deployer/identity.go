package deployer

import (
	"context"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// karmadaIdentities are the accounts of the Karmada API whose tokens go,
// as kubeconfigs, into Secrets of the host cluster: the continuum agent,
// the northbound API and the accounts reconciler (their roles are in the
// mlsysops-karmada chart).
var karmadaIdentities = []struct{ TokenSecret, HostSecret string }{
	{"mlsysops-continuum-agent-token", SecretKarmadaForCont},
	{"mlsysops-northbound-token", SecretKarmadaForNB},
	{"mlsysops-accounts-token", SecretKarmadaForAccounts},
}

// kubeconfigSecrets waits for the Karmada API's token controller to fill
// the identities' token Secrets and returns the host Secrets holding a
// kubeconfig for each: the Karmada API at server (as the host cluster's
// pods reach it), its CA, the token; context karmada-apiserver.
func kubeconfigSecrets(ctx context.Context, cl *Clusters, o *Options, timeout time.Duration) ([]*unstructured.Unstructured, error) {
	server := o.KarmadaAPIServer
	if server == "" {
		server = cl.Karmada.Config.Host
	}
	ca := cl.Karmada.Config.CAData
	if len(ca) == 0 && cl.Karmada.Config.CAFile != "" {
		b, err := os.ReadFile(cl.Karmada.Config.CAFile)
		if err != nil {
			return nil, fmt.Errorf("the Karmada API's CA: %w", err)
		}
		ca = b
	}
	var out []*unstructured.Unstructured
	for _, id := range karmadaIdentities {
		var token []byte
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			s, err := cl.Karmada.Kube.CoreV1().Secrets(Namespace).Get(ctx, id.TokenSecret, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			token = s.Data["token"]
			return len(token) > 0, nil
		})
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s in the Karmada API has no token yet (its token controller, part of Karmada's kube-controller-manager, fills it): %w", Namespace, id.TokenSecret, err)
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters[DefaultKarmadaContext] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
		kc.AuthInfos[DefaultKarmadaContext] = &clientcmdapi.AuthInfo{Token: string(token)}
		kc.Contexts[DefaultKarmadaContext] = &clientcmdapi.Context{Cluster: DefaultKarmadaContext, AuthInfo: DefaultKarmadaContext, Namespace: AppNamespace}
		kc.CurrentContext = DefaultKarmadaContext
		b, err := clientcmd.Write(*kc)
		if err != nil {
			return nil, err
		}
		out = append(out, secretObject(id.HostSecret, "continuum", map[string][]byte{"kubeconfig": b}))
	}
	return out, nil
}
