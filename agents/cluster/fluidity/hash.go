package fluidity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// SpecHash identifies a component spec, so a change is seen even when the
// rendered Deployment would compare equal field by field after defaulting.
// Deployments carry the hash of the spec they run (AnnotationSpecHash);
// overrides carry the hash of the application's spec they were made
// against (Override.Base).
func SpecHash(comp *mlsysopsv1.Component) string {
	// A Component is plain data: it always marshals.
	b, _ := json.Marshal(comp)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// AnnotationTemplateHash is a hash of the pod template the controller last
// wrote into a Deployment. The API server defaults a written template, so
// comparing field by field would see a change on every pass and rewrite
// the Deployment each time; the hash tells a real change.
const AnnotationTemplateHash = mlsysopsv1.LabelPrefix + "template-hash"

// TemplateHash identifies a rendered pod template.
func TemplateHash(t *corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}
