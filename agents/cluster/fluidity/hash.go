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
// Deployments carry the hash of the spec they run (mlsysopsv1.AnnotationSpecHash);
// overrides carry the hash of the application's spec they were made
// against (Override.Base).
func SpecHash(comp *mlsysopsv1.Component) string {
	// A Component is plain data: it always marshals.
	b, _ := json.Marshal(comp)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// TemplateHash identifies a rendered pod template.
func TemplateHash(t *corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}
