package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// PrometheusSource reads the wanted metrics from a Prometheus text
// endpoint, such as the local OpenTelemetry collector's exporter where
// applications push their QoS metrics (upstream LOCAL_OTEL_ENDPOINT).
type PrometheusSource struct {
	name   string
	url    string
	client *http.Client
}

// NewPrometheusSource returns a source named name that scrapes url. A nil
// client means http.DefaultClient; the Sampler bounds each scrape with its
// timeout.
func NewPrometheusSource(name, url string, client *http.Client) *PrometheusSource {
	if client == nil {
		client = http.DefaultClient
	}
	return &PrometheusSource{name: name, url: url, client: client}
}

// Name implements Source.
func (p *PrometheusSource) Name() string { return p.name }

// Collect implements Source: it scrapes the endpoint and returns the
// series of the wanted metric names. A wanted name matches a family by its
// exact name, or with the _total suffix the collector adds to counters.
// Histograms and summaries give <name>_sum and <name>_count.
func (p *PrometheusSource) Collect(ctx context.Context, wanted []string) ([]Reading, error) {
	if len(wanted) == 0 {
		return nil, nil
	}
	families, err := scrapeFamilies(ctx, p.client, p.url)
	if err != nil {
		return nil, err
	}
	return selectFamilies(families, wanted), nil
}

// scrapeFamilies reads a Prometheus text endpoint.
func scrapeFamilies(ctx context.Context, client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxScrapeBytes))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return families, nil
}

// maxScrapeBytes bounds what one scrape reads: an endpoint is not allowed
// to make the agent hold an arbitrary amount of text.
const maxScrapeBytes = 16 << 20

func selectFamilies(families map[string]*dto.MetricFamily, wanted []string) []Reading {
	var out []Reading
	for _, w := range wanted {
		f, ok := families[w]
		name := w
		if !ok {
			if f, ok = families[w+"_total"]; !ok {
				continue
			}
		}
		for _, m := range f.GetMetric() {
			labels := Labels{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if len(labels) == 0 {
				labels = nil
			}
			switch {
			case m.Gauge != nil:
				out = append(out, Reading{Name: name, Labels: labels, Value: m.GetGauge().GetValue()})
			case m.Counter != nil:
				out = append(out, Reading{Name: name, Labels: labels, Value: m.GetCounter().GetValue()})
			case m.Untyped != nil:
				out = append(out, Reading{Name: name, Labels: labels, Value: m.GetUntyped().GetValue()})
			case m.Histogram != nil:
				out = append(out,
					Reading{Name: name + "_sum", Labels: labels, Value: m.GetHistogram().GetSampleSum()},
					Reading{Name: name + "_count", Labels: labels, Value: float64(m.GetHistogram().GetSampleCount())})
			case m.Summary != nil:
				out = append(out,
					Reading{Name: name + "_sum", Labels: labels, Value: m.GetSummary().GetSampleSum()},
					Reading{Name: name + "_count", Labels: labels, Value: float64(m.GetSummary().GetSampleCount())})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
