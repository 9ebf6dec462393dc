// Package sanitize turns free-form MLSysOps names and labels into valid
// Kubernetes label values and label names. Package resources builds node
// and workload labels from them; the description checks use them to reject
// labels that would collide. It needs nothing beyond the standard library,
// so that the node agent's light description check (description/generic)
// shares it without the Kubernetes API types.
package sanitize

import "strings"

// MaxLabelValue is the longest label value (and label name part)
// Kubernetes accepts.
const MaxLabelValue = 63

// userLabelPrefix is the part of a user label's name before the sanitized
// key: mlsysops.eu/label.<key>. It counts against the name's length.
const userLabelPrefix = "label."

// LabelValue turns s into a valid Kubernetes label value: every character
// other than letters, digits, '-', '_' and '.' becomes '-', the value is cut
// to 63 characters and must start and end with a letter or a digit. It
// returns "" when nothing is left.
func LabelValue(s string) string {
	return sanitize(s, MaxLabelValue)
}

// UserLabel splits a free-form description label, "key:value" or "key",
// into a sanitized name (the key, short enough to follow "label." in a
// label name) and a sanitized value ("true" for a label without a colon).
// ok is false when the key sanitizes to nothing.
func UserLabel(label string) (name, value string, ok bool) {
	k, v, hasValue := strings.Cut(label, ":")
	name = sanitize(k, MaxLabelValue-len(userLabelPrefix))
	if name == "" {
		return "", "", false
	}
	value = "true"
	if hasValue {
		value = LabelValue(v)
	}
	return name, value, true
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
