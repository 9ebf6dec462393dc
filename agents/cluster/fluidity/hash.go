package fluidity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// specHash identifies a component spec, so a change is seen even when the
// rendered Deployment would compare equal field by field after defaulting.
func specHash(comp *mlsysopsv1.Component) (string, error) {
	b, err := json.Marshal(comp)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}
