package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// legacyRoot is the root key of the upstream ML connector's descriptions.
const legacyRoot = "MLSysOpsApplication"

// legacyID is the key of the deployment id in that form.
const legacyID = "mlsysops-id"

// parseMLDeployment reads an ML deployment: the upstream ML connector's
// legacy form ({"MLSysOpsApplication": {"mlsysops-id": ..., camelCase
// fields}}) or an application description. The deployment id is the
// mlsysops-id, or the application's name; it also names the MLSysOpsApp.
//
// Every component that declares a container port gets external_access,
// so that the cluster agent gives it a NodePort Service: the deployment's
// inference endpoint, reachable from outside its cluster as upstream's
// global_endpoint was.
func parseMLDeployment(data []byte, format description.Format) (string, *mlsysopsv1.MLSysOpsApp, error) {
	id, app, err := parseMLDescription(data, format)
	if err != nil {
		return "", nil, err
	}
	for i := range app.Spec.Components {
		comp := &app.Spec.Components[i]
		for _, c := range comp.Containers {
			if len(c.Ports) > 0 {
				comp.ExternalAccess = true
			}
		}
	}
	return id, app, nil
}

// parseMLDescription reads either form of an ML deployment.
func parseMLDescription(data []byte, format description.Format) (string, *mlsysopsv1.MLSysOpsApp, error) {
	doc, ok := decodeObject(data, format)
	if !ok || doc[legacyRoot] == nil {
		id, app, err := parseApplication(data, format)
		return id, app, err
	}
	converted, renames, problems := convertLegacy(doc)
	if len(problems) > 0 {
		return "", nil, invalid(fmt.Sprintf("the ML deployment has %d problem(s); each is listed with its field path", len(problems)), problems)
	}
	b, err := json.Marshal(converted)
	if err != nil {
		return "", nil, fmt.Errorf("encode converted ML deployment: %w", err)
	}
	app, errs := description.ParseApp(b, description.FormatJSON)
	if len(errs) > 0 {
		problems := problemsFrom(errs)
		for i := range problems {
			problems[i].Field = legacyPath(problems[i].Field, renames)
		}
		return "", nil, invalid(fmt.Sprintf("the ML deployment has %d problem(s); each is listed with its field path", len(problems)), problems)
	}
	return app.Name, app, nil
}

// decodeObject decodes a JSON or YAML object, or reports that the body is
// not one.
func decodeObject(data []byte, format description.Format) (map[string]any, bool) {
	j := data
	if format != description.FormatJSON && !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		var err error
		if j, err = yaml.YAMLToJSON(data); err != nil {
			return nil, false
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(j, &doc); err != nil {
		return nil, false
	}
	return doc, true
}

// convertLegacy turns the legacy form into the upstream application form:
// keys to snake_case, Component to metadata, the deployment id to the
// name, "*" placements to none. renames maps each converted key back to the
// key the client wrote, for error paths.
func convertLegacy(doc map[string]any) (map[string]any, map[string]string, []api.FieldProblem) {
	root := legacyRoot
	var problems []api.FieldProblem
	for k := range doc {
		if k != legacyRoot {
			problems = append(problems, api.FieldProblem{Field: k, Type: "FieldValueNotSupported",
				Message: "Unsupported value: unknown root key; the legacy form has the single root key " + legacyRoot})
		}
	}
	in, ok := doc[legacyRoot].(map[string]any)
	if !ok {
		return nil, nil, append(problems, api.FieldProblem{Field: root, Type: "FieldValueTypeInvalid", Message: "Invalid value: must be an object"})
	}
	id := ""
	switch v := in[legacyID].(type) {
	case string:
		id = v
	case float64:
		id = strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
	default:
		problems = append(problems, api.FieldProblem{Field: root + "." + legacyID, Type: "FieldValueTypeInvalid", Message: "Invalid value: must be a string"})
	}
	if id == "" || id == "0" {
		problems = append(problems, api.FieldProblem{Field: root + "." + legacyID, Type: "FieldValueRequired", Message: "Required value: the deployment id"})
	}
	if len(problems) > 0 {
		return nil, nil, problems
	}
	renames := map[string]string{}
	out := snakeKeys(in, renames).(map[string]any)
	delete(out, legacyID)
	out["name"] = id
	renames["name"] = legacyID
	if cp, ok := out["cluster_placement"].(map[string]any); ok {
		if ids, ok := cp["cluster_id"].([]any); ok && anyStar(ids) {
			delete(cp, "cluster_id")
		}
		if len(cp) == 0 {
			delete(out, "cluster_placement")
		}
	}
	if comps, ok := out["components"].([]any); ok {
		for _, c := range comps {
			comp, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if meta, ok := comp["component"]; ok {
				if _, has := comp["metadata"]; !has {
					comp["metadata"] = meta
					delete(comp, "component")
				}
			}
			if np, ok := comp["node_placement"].(map[string]any); ok && np["node"] == "*" {
				delete(np, "node")
			}
		}
	}
	return map[string]any{mlsysopsv1.KindApp: out}, renames, nil
}

func anyStar(vs []any) bool {
	for _, v := range vs {
		if v == "*" {
			return true
		}
	}
	return len(vs) == 0
}

// snakeKeys converts every object key to snake_case, recording renames.
func snakeKeys(v any, renames map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			s := snake(k)
			if s != k {
				renames[s] = k
			}
			out[s] = snakeKeys(val, renames)
		}
		return out
	case []any:
		for i := range x {
			x[i] = snakeKeys(x[i], renames)
		}
		return x
	}
	return v
}

// snake converts camelCase to snake_case, keeping acronyms together:
// clusterID is cluster_id, imagePullPolicy image_pull_policy.
func snake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				(unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

var segmentRE = regexp.MustCompile(`^([^\[]*)(.*)$`)

// legacyPath maps a field path of the converted description back to the
// keys of the legacy form.
func legacyPath(path string, renames map[string]string) string {
	if path == "" {
		return ""
	}
	parts := strings.Split(path, ".")
	for i, p := range parts {
		m := segmentRE.FindStringSubmatch(p)
		name, index := m[1], m[2]
		switch {
		case i == 0 && name == mlsysopsv1.KindApp:
			name = legacyRoot
		case name == "metadata" && i > 0 && strings.HasPrefix(parts[i-1], "components["):
			name = "Component"
		case i == 1 && name == "name":
			name = legacyID
		default:
			if orig, ok := renames[name]; ok {
				name = orig
			}
		}
		parts[i] = name + index
	}
	return strings.Join(parts, ".")
}
