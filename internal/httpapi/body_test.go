package httpapi

import (
	"errors"
	"testing"
)

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
		err := DecodeJSON([]byte(tc.in), &b)
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
