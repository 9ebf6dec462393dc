package handlers

import (
	"errors"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/description"
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
		got, ok := mediaFormat(c.kind, c.ct)
		if ok != c.accept || (ok && got != c.want) {
			t.Errorf("mediaFormat(%d, %q) = %v, %v; want %v, %v", c.kind, c.ct, got, ok, c.want, c.accept)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Mode *int     `json:"mode"`
		List []string `json:"agents"`
	}
	cases := map[string]struct {
		in     string
		status int
		field  string
	}{
		"ok":            {in: `{"mode": 1}`},
		"syntax":        {in: `{"mode": `, status: 400},
		"not an object": {in: `[1]`, status: 422},
		"wrong type":    {in: `{"mode": "one"}`, status: 422, field: "mode"},
		"unknown field": {in: `{"mode": 1, "nodes": []}`, status: 422, field: "nodes"},
		"trailing data": {in: `{"mode": 1} {"mode": 0}`, status: 400},
	}
	for name, tc := range cases {
		var b body
		err := decodeJSON([]byte(tc.in), &b)
		var e *Error
		switch {
		case tc.status == 0 && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.status != 0 && (!errors.As(err, &e) || e.Status != tc.status):
			t.Errorf("%s: error %v, want status %d", name, err, tc.status)
		case tc.field != "" && (len(e.Problems) != 1 || e.Problems[0].Field != tc.field):
			t.Errorf("%s: problems %+v, want field %s", name, e.Problems, tc.field)
		}
	}
}
