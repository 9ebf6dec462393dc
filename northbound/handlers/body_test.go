package handlers

import (
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
)

func TestMediaFormat(t *testing.T) {
	cases := []struct {
		kind   bodyKind
		ct     string
		want   description.Format
		accept bool
	}{
		{bodyDescription, "", description.FormatAuto, true},
		{bodyDescription, "application/json", description.FormatJSON, true},
		{bodyDescription, "application/json; charset=utf-8", description.FormatJSON, true},
		{bodyDescription, "application/vnd.mlsysops+json", description.FormatJSON, true},
		{bodyDescription, "application/yaml", description.FormatYAML, true},
		{bodyDescription, "application/x-yaml", description.FormatYAML, true},
		{bodyDescription, "text/yaml", description.FormatYAML, true},
		{bodyDescription, "application/json; charset=latin1", 0, false},
		{bodyDescription, "text/plain", 0, false},
		{bodyDescription, "application/x-www-form-urlencoded", 0, false},
		{bodyDescription, "multipart/form-data; boundary=x", 0, false},
		{bodyDescription, "garbage;;", 0, false},
		{bodyJSON, "application/yaml", 0, false},
		{bodyJSON, "application/json", description.FormatJSON, true},
		{bodyPolicy, "text/plain", description.FormatAuto, true},
		{bodyPolicy, "application/json", description.FormatJSON, true},
		{bodyPolicy, "image/png", 0, false},
	}
	for _, c := range cases {
		mt, ok := httpapi.ParseMediaType(c.ct)
		var got description.Format
		if ok {
			got, ok = mediaFormat(c.kind, mt)
		}
		if ok != c.accept || (ok && got != c.want) {
			t.Errorf("mediaFormat(%d, %q) = %v, %v; want %v, %v", c.kind, c.ct, got, ok, c.want, c.accept)
		}
	}
}
