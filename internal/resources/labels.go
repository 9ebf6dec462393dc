package resources

import (
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/resources/sanitize"
)

// SanitizeLabelValue turns s into a valid Kubernetes label value: every
// character other than letters, digits, '-', '_' and '.' becomes '-', the
// value is cut to 63 characters and must start and end with a letter or a
// digit. It returns "" when nothing is left.
func SanitizeLabelValue(s string) string {
	return sanitize.LabelValue(s)
}

// UserLabel converts a free-form description label into a Kubernetes
// label. "node-type:rpi" becomes mlsysops.eu/label.node-type=rpi; a label
// without a colon, such as "gpu", becomes mlsysops.eu/label.gpu=true. Keys
// and values are sanitized; ok is false when the key sanitizes to nothing.
// Node labels and the labels an application asks for go through this same
// function, so they match.
func UserLabel(label string) (key, value string, ok bool) {
	name, value, ok := sanitize.UserLabel(label)
	if !ok {
		return "", "", false
	}
	return mlsysopsv1.LabelUserPrefix + name, value, true
}
