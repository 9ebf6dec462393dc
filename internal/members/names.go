package members

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Namespace is the namespace that holds an application's workloads in a
// member cluster: one per application, so that component names can be
// Service names (as upstream applications expect) without clashing with
// another application's, and removal deletes everything at once.
func Namespace(app string) string { return DNSLabel("mls-" + app) }

// ObjectName is the name of a component's Deployment and Service in its
// application's namespace.
func ObjectName(component string) string { return DNSLabel(component) }

// ServiceHost is the in-cluster DNS name of a component's Service,
// <name>.<namespace>.svc.
func ServiceHost(app, component string) string {
	return ObjectName(component) + "." + Namespace(app) + ".svc"
}

// DNSLabel makes a valid DNS-1123 label of at most 63 characters: lower
// case, invalid characters replaced, long names cut and suffixed with a
// hash so distinct names stay distinct.
func DNSLabel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(validation.IsDNS1123Label(out)) == 0 && out == s {
		return out
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:3])
	if len(out) > 63-7 {
		out = strings.TrimRight(out[:63-7], "-")
	}
	if out == "" {
		return "x-" + suffix
	}
	return out + "-" + suffix
}
