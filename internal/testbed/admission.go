package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	"github.com/mlsysops-go/mlsysops/internal/images"
)

// Pods of images the real nodes do not have (the examples'
// registry.example.org images) must not start there: nothing can be pulled
// on this machine, so they would fail. The testbed runs a mutating
// admission webhook on every apiserver with real nodes that gives such
// pods a required node affinity to KWOK's nodes (KWOKLabel=fake) and says
// why in an annotation. The product is unaware of it: it places by its
// own rules, and a pod that cannot go where it was placed stays Pending
// with the scheduler's reason, as it would on a real cluster whose node
// cannot take it (the cluster agent then places it elsewhere). Pods of the
// project's own images, which every real node has, are left alone.

// AnnotationSimulatedOnly is set on pods the webhook keeps on KWOK nodes.
const AnnotationSimulatedOnly = "testbed.mlsysops.eu/simulated-only"

// admissionWebhookName names the testbed's webhook configuration.
const admissionWebhookName = "mlsysops-testbed-real-nodes"

// AdmissionHandler answers AdmissionReviews for pods.
type AdmissionHandler struct {
	// preloaded returns the normalized references every real node has.
	preloaded func() map[string]bool
	log       *slog.Logger
}

// NewAdmissionHandler returns the webhook for the images the real nodes
// have, as preloaded lists them (references, or repo@sha256:... digests).
func NewAdmissionHandler(preloaded func() []string, log *slog.Logger) *AdmissionHandler {
	return &AdmissionHandler{log: log, preloaded: func() map[string]bool {
		set := map[string]bool{}
		for _, r := range preloaded() {
			set[NormalizeImage(r)] = true
		}
		return set
	}}
}

// manifestImages returns the images of an images manifest (images.json),
// read again whenever the file changes; none while it is missing.
func manifestImages(file string) func() []string {
	var mu sync.Mutex
	var mtime time.Time
	var refs []string
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		st, err := os.Stat(file)
		if err != nil {
			return nil
		}
		if !st.ModTime().Equal(mtime) {
			if m, err := images.LoadManifest(filepath.Dir(file)); err == nil {
				refs = refs[:0]
				for _, im := range m.Images {
					repo := im.Ref
					if i := strings.LastIndex(im.Ref, ":"); i > strings.LastIndex(im.Ref, "/") {
						repo = im.Ref[:i]
					}
					refs = append(refs, im.Ref, repo+"@"+im.Digest)
				}
				mtime = st.ModTime()
			}
		}
		return append([]string(nil), refs...)
	}
}

// RunAdmission serves the webhook over TLS on listen until ctx ends; the
// preloaded images are those of the images manifest (bin/images/images.json).
func RunAdmission(ctx context.Context, listen, certFile, keyFile, manifest string, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/mutate", NewAdmissionHandler(manifestImages(manifest), log))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("testbed admission webhook listening", "listen", listen, "images", manifest)
	if err := srv.ListenAndServeTLS(certFile, keyFile); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

// NormalizeImage spells an image reference as containerd does:
// docker.io/library/ for short names, :latest when there is neither tag
// nor digest.
func NormalizeImage(ref string) string {
	name, digest, hasDigest := strings.Cut(ref, "@")
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !hasSlash {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	if hasDigest {
		return name + "@" + digest
	}
	if i := strings.LastIndex(name, ":"); i < 0 || strings.Contains(name[i:], "/") {
		name += ":latest"
	}
	return name
}

// missingImages lists the pod's images no real node has.
func (h *AdmissionHandler) missingImages(pod *corev1.Pod, preloaded map[string]bool) []string {
	var out []string
	seen := map[string]bool{}
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			if !preloaded[NormalizeImage(c.Image)] && !seen[c.Image] {
				seen[c.Image] = true
				out = append(out, c.Image)
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	sort.Strings(out)
	return out
}

// patchFor returns the JSON patch that keeps pod on KWOK nodes, or nil
// when every image of the pod is preloaded.
func (h *AdmissionHandler) patchFor(pod *corev1.Pod) ([]byte, []string, error) {
	missing := h.missingImages(pod, h.preloaded())
	if len(missing) == 0 {
		return nil, nil, nil
	}
	req := corev1.NodeSelectorRequirement{Key: KWOKLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"fake"}}
	aff := pod.Spec.Affinity.DeepCopy()
	if aff == nil {
		aff = &corev1.Affinity{}
	}
	if aff.NodeAffinity == nil {
		aff.NodeAffinity = &corev1.NodeAffinity{}
	}
	ns := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if ns == nil || len(ns.NodeSelectorTerms) == 0 {
		ns = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	// Terms are ORed: the requirement goes into every one.
	for i := range ns.NodeSelectorTerms {
		ns.NodeSelectorTerms[i].MatchExpressions = append(ns.NodeSelectorTerms[i].MatchExpressions, req)
	}
	aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = ns
	reason := "images not preloaded on the testbed's real nodes: " + strings.Join(missing, ", ")
	ops := []map[string]any{{"op": "add", "path": "/spec/affinity", "value": aff}}
	if pod.Annotations == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{AnnotationSimulatedOnly: reason}})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(AnnotationSimulatedOnly, "~", "~0"), "/", "~1"), "value": reason})
	}
	b, err := json.Marshal(ops)
	return b, missing, err
}

// ServeHTTP handles one AdmissionReview.
func (h *AdmissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusBadRequest, Message: "not a pod: " + err.Error()}
	} else if patch, missing, err := h.patchFor(&pod); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusInternalServerError, Message: err.Error()}
	} else if patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		h.log.Info("pod kept on KWOK nodes", "namespace", review.Request.Namespace, "pod", pod.Name, "generate_name", pod.GenerateName, "images", missing)
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// installAdmissionWebhook points the apiserver's pod admission at the
// testbed's webhook.
func installAdmissionWebhook(ctx context.Context, cs kubernetes.Interface, url, caFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	want := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: admissionWebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "real-nodes.testbed.mlsysops.eu",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			// The MLSysOps agents' pods run the project's images only,
			// each bound to its node by its DaemonSet: they are left
			// alone, so that a tag the real nodes lack fails on that node
			// as it would on a real cluster, instead of being moved.
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{deployer.Namespace},
			}}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		want.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("webhook configuration %s: %w", want.Name, err)
	}
	return nil
}

// testbedBinary is cmd/testbed built into the bin folder: its hidden
// admission command is the webhook.
const testbedBinary = "mlsysops-testbed"

// buildTestbedBinary builds cmd/testbed into the bin folder.
func (tb *Testbed) buildTestbedBinary(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return fmt.Errorf("testbed admission webhook: %w; run the testbed from the checkout", err)
	}
	return goBuild(ctx, root, nil, "-o", filepath.Join(tb.opts.BinDir, testbedBinary), "./cmd/testbed")
}

// installAdmission registers the webhook on every apiserver with real
// nodes.
func (tb *Testbed) installAdmission(ctx context.Context) error {
	contexts := map[string]bool{}
	for _, n := range tb.real {
		contexts[n.context] = true
	}
	for c := range contexts {
		cfg, err := restConfig(tb.l.path("kubeconfig"), c)
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if err := installAdmissionWebhook(ctx, cs, tb.l.url(portAdmission)+"/mutate", tb.certs.ca.CertFile); err != nil {
			return fmt.Errorf("cluster %s: %w", c, err)
		}
	}
	if len(contexts) > 0 {
		tb.progress("pods of images the real nodes lack stay on KWOK nodes (%d apiservers)", "admission webhook", len(contexts))
	}
	return nil
}
