package deployer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
)

// ejabberdAPIPort is the bundled ejabberd's admin API port.
const ejabberdAPIPort = 5443

// provisionAccounts creates every account of the plan with its password
// (or sets the password of an existing one) and links each agent with its
// parent. In-band registration stays off.
func provisionAccounts(ctx context.Context, cl *Clusters, o *Options, p *Plan, m *Material, progress func(string, ...any)) error {
	prov, stop, err := provisioner(ctx, cl, o, m.EjabberdAdminPassword, m.CABundle)
	if err != nil {
		return err
	}
	defer stop()
	// The admin account may still have the one-time password it was
	// created with from a command line: give it the admin password first.
	if set, err := prov.Bootstrap(ctx, m.EjabberdBootstrapPassword); err != nil {
		return fmt.Errorf("ejabberd admin account: %w", err)
	} else if set {
		progress("ejabberd admin account: its one-time password replaced by the installation's admin password (admin API)")
	}
	for _, a := range p.Accounts {
		if err := prov.EnsureAccount(ctx, a.JID, m.Passwords[a.JID]); err != nil {
			return fmt.Errorf("XMPP account %s: %w", a.JID, err)
		}
	}
	links := 0
	for _, a := range p.Accounts {
		if a.Parent == "" {
			continue
		}
		if err := prov.Link(ctx, a.Parent, a.JID); err != nil {
			return fmt.Errorf("roster link %s <-> %s: %w", a.Parent, a.JID, err)
		}
		links++
	}
	progress("XMPP accounts: %d in place, %d parent-child links (ejabberd admin API)", len(p.Accounts), links)
	return nil
}

// provisioner reaches ejabberd's admin API: the given URL for external
// services, a port-forward to the bundled server's pod otherwise. stop
// ends the port-forward.
func provisioner(ctx context.Context, cl *Clusters, o *Options, adminPassword string, ca []byte) (*provision.HTTPAPI, func(), error) {
	client := &http.Client{Timeout: 30 * time.Second}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, nil, errors.New("the XMPP CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	client.Transport = &http.Transport{TLSClientConfig: tlsConfig}
	url, stop := o.EjabberdAPI, func() {}
	if o.Services == ModeBundled {
		local, s, err := forwardEjabberd(ctx, cl)
		if err != nil {
			return nil, nil, err
		}
		url, stop = "https://127.0.0.1:"+strconv.Itoa(local)+"/api", s
		// The certificate names the XMPP domain, not the forwarded port.
		tlsConfig.ServerName = o.XMPPDomain
	}
	return provision.NewHTTPAPI(url, o.adminJID(), adminPassword, client), stop, nil
}

// pruneAccounts deletes, with their links, the XMPP accounts this
// installation made (m.Recorded) for agents no longer described: only the
// topology's accounts may log in. It runs once the accounts reconciler
// reads the new descriptions (its pod restarts when they change, and the
// continuum stage waits for it), since one still on the old ones would
// create them again.
func pruneAccounts(ctx context.Context, cl *Clusters, o *Options, p *Plan, m *Material, progress func(string, ...any)) error {
	planned := map[string]bool{}
	for _, a := range p.Accounts {
		planned[a.JID] = true
	}
	var stale []string
	for _, j := range m.Recorded {
		if !planned[j] {
			stale = append(stale, j)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	prov, stop, err := provisioner(ctx, cl, o, m.EjabberdAdminPassword, m.CABundle)
	if err != nil {
		return err
	}
	defer stop()
	for _, j := range stale {
		if err := deleteWithLinks(ctx, prov, j); err != nil {
			return err
		}
		progress("XMPP account %s deleted: its agent is no longer described", j)
	}
	return nil
}

// deleteWithLinks removes the roster links MLSysOps made between the
// account and others, then the account.
func deleteWithLinks(ctx context.Context, prov *provision.HTTPAPI, account string) error {
	items, err := prov.Roster(ctx, account)
	if err != nil {
		return fmt.Errorf("XMPP account %s: %w", account, err)
	}
	for _, it := range items {
		if it.Ours() {
			if err := prov.Unlink(ctx, account, it.JID); err != nil {
				return fmt.Errorf("XMPP account %s: %w", account, err)
			}
		}
	}
	if err := prov.DeleteAccount(ctx, account); err != nil {
		return fmt.Errorf("XMPP account %s: %w", account, err)
	}
	return nil
}

// removeAccounts deletes accounts; a missing one is no error.
func removeAccounts(ctx context.Context, prov provision.Provisioner, accounts []string) error {
	var errs []error
	for _, a := range accounts {
		if err := prov.DeleteAccount(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("XMPP account %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

// forwardEjabberd forwards a local port to the admin API of the bundled
// ejabberd's pod, as kubectl port-forward does.
func forwardEjabberd(ctx context.Context, cl *Clusters) (int, func(), error) {
	pods, err := cl.Host.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=mlsysops-ejabberd"})
	if err != nil {
		return 0, nil, fmt.Errorf("find the ejabberd pod: %w", err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			pod = &pods.Items[i]
		}
	}
	if pod == nil {
		return 0, nil, fmt.Errorf("no running ejabberd pod in %s of the host cluster", Namespace)
	}
	transport, upgrader, err := spdy.RoundTripperFor(cl.Host.Config)
	if err != nil {
		return 0, nil, err
	}
	req := cl.Host.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(ejabberdAPIPort)}, stopCh, readyCh, io.Discard, io.Discard)
	if err != nil {
		return 0, nil, err
	}
	errCh := make(chan error, 1)
	go func() { errCh <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-errCh:
		return 0, nil, fmt.Errorf("port-forward to %s: %w", pod.Name, err)
	case <-ctx.Done():
		close(stopCh)
		return 0, nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stopCh)
		return 0, nil, fmt.Errorf("port-forward to %s: no local port: %v", pod.Name, err)
	}
	return int(ports[0].Local), func() { close(stopCh) }, nil
}
