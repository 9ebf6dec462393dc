package resources

import (
	"strings"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// maxLabelValue is the longest label value (and label name part)
// Kubernetes accepts.
const maxLabelValue = 63

// SanitizeLabelValue turns s into a valid Kubernetes label value: every
// character other than letters, digits, '-', '_' and '.' becomes '-', the
// value is cut to 63 characters and must start and end with a letter or a
// digit. It returns "" when nothing is left.
func SanitizeLabelValue(s string) string {
	return sanitize(s, maxLabelValue)
}

func sanitize(s string, max int) string {
	b := []byte(strings.TrimSpace(s))
	for i, c := range b {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '-'
		}
	}
	out := trimNonAlnum(string(b))
	if len(out) > max {
		out = trimNonAlnum(out[:max])
	}
	return out
}

func trimNonAlnum(s string) string {
	start, end := 0, len(s)
	for start < end && !isAlnum(s[start]) {
		start++
	}
	for end > start && !isAlnum(s[end-1]) {
		end--
	}
	return s[start:end]
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// UserLabel converts a free-form description label into a Kubernetes
// label. "node-type:rpi" becomes mlsysops.eu/label.node-type=rpi; a label
// without a colon, such as "gpu", becomes mlsysops.eu/label.gpu=true. Keys
// and values are sanitized; ok is false when the key sanitizes to nothing.
// Node labels and the labels an application asks for go through this same
// function, so they match.
func UserLabel(label string) (key, value string, ok bool) {
	k, v, hasValue := strings.Cut(label, ":")
	name := sanitize(k, maxLabelValue-len("label."))
	if name == "" {
		return "", "", false
	}
	value = "true"
	if hasValue {
		value = SanitizeLabelValue(v)
	}
	return mlsysopsv1.LabelUserPrefix + name, value, true
}
