package testbed

import "testing"

func TestDetectorFollows(t *testing.T) {
	line := "I1129 04:56:11.992842    1105 detector.go:184] Setup informer for mlsysops.eu/v1, Resource=mlsysopsapps\n"
	start := "\n==== 2026-11-29T04:55:00Z start karmada-controller-manager\n"
	cases := map[string]struct {
		log  string
		want bool
	}{
		"empty":                          {"", false},
		"this run":                       {start + "I1129 x\n" + line, true},
		"no start marker":                {line, true},
		"an earlier run only":            {start + line + start + "I1129 y\n", false},
		"an earlier run and this one":    {start + line + start + line, true},
		"another kind of the API":        {start + "Setup informer for mlsysops.eu/v1, Resource=mlsysopsnodes\n", false},
		"the line before the last start": {line + start, false},
	}
	for name, c := range cases {
		if got := detectorFollows([]byte(c.log)); got != c.want {
			t.Errorf("%s: detectorFollows = %v, want %v", name, got, c.want)
		}
	}
}
