package generic

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Description is one system description as LoadOwn returns it.
type Description struct {
	// Kind is the description's kind, e.g. MLSysOpsNode.
	Kind string
	// Name is its name, as metadata.name of its custom resource holds it:
	// a node's host name, a cluster's cluster_id.
	Name string
	// File is the file it was read from.
	File string
	// Spec is the checked and normalised description, as the spec of its
	// custom resource holds it (snake_case keys, frequencies in Hz).
	Spec map[string]interface{}
}

// LoadOwn loads the system description of kind for hostname from dir (see
// FindOwn) and checks it: its schema, its name and the rules of its kind.
// The error, if any, is an *Error listing every problem with its field
// path. It is the check package description applies, except that a
// resource's metadata is checked for its fields' names and for its name and
// namespace only, without decoding it into the ObjectMeta type.
func LoadOwn(dir, hostname, kind string) (*Description, error) {
	path, err := FindOwn(dir, hostname, kind)
	if err != nil {
		return nil, err
	}
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, errs := Check(data, FormatFromFileName(path), "", checkMetadata)
	if c == nil {
		return nil, NewError(path, errs)
	}
	name, nameErrs := c.Name(path)
	errs = append(errs, nameErrs...)
	errs = append(errs, ValidateSpec(c.Kind, c.Spec(), c.SpecPath)...)
	if len(errs) > 0 {
		return nil, NewError(path, errs)
	}
	if c.Kind != kind {
		return nil, fmt.Errorf("load own description %s: it is a %s, expected a %s", path, c.Kind, kind)
	}
	return &Description{Kind: c.Kind, Name: name, File: path, Spec: c.Spec()}, nil
}

// ReadFile reads a description file, refusing to read more than
// MaxDocumentSize (and one byte, so that the size check reports it).
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read description: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentSize+1))
	if err != nil {
		return nil, fmt.Errorf("read description %s: %w", path, err)
	}
	return data, nil
}

// objectMetaFields are the JSON names of the ObjectMeta fields.
var objectMetaFields = map[string]bool{
	"name": true, "generateName": true, "namespace": true, "selfLink": true, "uid": true,
	"resourceVersion": true, "generation": true, "creationTimestamp": true, "deletionTimestamp": true,
	"deletionGracePeriodSeconds": true, "labels": true, "annotations": true, "ownerReferences": true,
	"finalizers": true, "managedFields": true,
}

// checkMetadata is LoadOwn's MetadataFunc: metadata is an object of
// ObjectMeta's fields, name and namespace are strings and the namespace is
// a DNS-1123 label.
func checkMetadata(v interface{}) (string, field.ErrorList) {
	p := field.NewPath("metadata")
	m, ok := v.(map[string]interface{})
	if !ok {
		return "", field.ErrorList{field.TypeInvalid(p, ShownValue(v), "must be an object, not "+ValueKind(v))}
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(m) {
		if !objectMetaFields[k] {
			errs = append(errs, field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("unknown field %q", k)))
		}
	}
	str := func(key string) string {
		s, ok := m[key].(string)
		if !ok && m[key] != nil {
			errs = append(errs, field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("%s must be a string, not %s", key, ValueKind(m[key]))))
		}
		return s
	}
	name, namespace := str("name"), str("namespace")
	if namespace != "" {
		for _, msg := range validation.IsDNS1123Label(namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), namespace, msg))
		}
	}
	if len(errs) > 0 {
		return "", errs
	}
	return name, nil
}

// Hostname returns the name an agent looks its own description up by: the
// NODE_NAME environment variable (set from the pod's spec.nodeName), else
// the machine's host name.
func Hostname() (string, error) {
	if n := strings.TrimSpace(os.Getenv("NODE_NAME")); n != "" {
		return n, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("find this agent's host name: set NODE_NAME: %w", err)
	}
	return h, nil
}

// FindOwn returns the path of the description of kind for hostname in dir:
// <hostname>.yaml or <hostname>.yml, in the kind's folder (continuum/,
// clusters/, nodes/, datacenters/) or at the top of dir (a ConfigMap mount).
func FindOwn(dir, hostname, kind string) (string, error) {
	var folder string
	for f, k := range kindFolders {
		if k == kind {
			folder = f
		}
	}
	var candidates []string
	for _, d := range []string{filepath.Join(dir, folder), dir} {
		for _, ext := range []string{".yaml", ".yml"} {
			candidates = append(candidates, filepath.Join(d, hostname+ext))
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("find the %s description of %q: none of %s exists; name the file after the host name (or set NODE_NAME)",
		kind, hostname, strings.Join(candidates, ", "))
}
