package node

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

func TestAppDescription(t *testing.T) {
	spec := func(comp, image string) json.RawMessage {
		return json.RawMessage(`{"name":"shop","components":[{"metadata":{"name":"` + comp + `"},"containers":[{"image":"` + image + `"}]}]}`)
	}
	comp := func(name, image string) any {
		return map[string]any{"metadata": map[string]any{"name": name}, "containers": []any{map[string]any{"image": image}}}
	}
	cases := map[string]struct {
		placed map[string]messaging.ComponentPlaced
		want   map[string]any
	}{
		"no spec": {
			placed: map[string]messaging.ComponentPlaced{"web": {Name: "shop", ComponentName: "web"}},
			want:   map[string]any{"name": "shop", "component_name": "web", "components": []any{"web"}},
		},
		"each component's own spec": {
			placed: map[string]messaging.ComponentPlaced{
				"web": {Name: "shop", ComponentName: "web", Spec: spec("web", "web:2"), PodSpec: json.RawMessage(`{"x":1}`)},
				"db":  {Name: "shop", ComponentName: "db", Spec: spec("db", "db:1")},
			},
			want: map[string]any{"name": "shop", "component_name": "db", "components": []any{"db", "web"},
				"spec": map[string]any{"name": "shop", "components": []any{comp("db", "db:1"), comp("web", "web:2")}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, AppDescription("shop", tc.placed)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
