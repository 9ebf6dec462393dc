package fluidity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

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
