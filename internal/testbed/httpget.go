package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// GetJSON decodes the JSON answer of a GET of url (an agent's /status,
// say) into v; any status but 200 is an error.
func GetJSON(ctx context.Context, url string, v any) error {
	resp, err := getOK(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// GetOK does a GET of url (a /readyz, say) and fails for any status but
// 200.
func GetOK(ctx context.Context, url string) error {
	resp, err := getOK(ctx, url)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// getOK returns the answer to a GET of url when its status is 200; the
// caller closes its body.
func getOK(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}

// MetricValue returns the value of one series of a Prometheus /metrics
// page at url, named exactly as the text format writes it
// (name{label="value",...}); 0 when the page lacks it.
func MetricValue(t testing.TB, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: metric %s: %v", url, series, err)
			}
			return f
		}
	}
	return 0
}
