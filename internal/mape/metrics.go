package mape

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus metrics.
type metrics struct {
	plans      *prometheus.CounterVec
	discards   *prometheus.CounterVec
	analyze    *prometheus.HistogramVec
	plan       *prometheus.HistogramVec
	policyErrs *prometheus.CounterVec
	results    *prometheus.CounterVec
	loadErrs   *prometheus.CounterVec
	inLog      *planLogCollector
	collectors []prometheus.Collector
}

func newMetrics(e *Engine) *metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 10) // 100µs .. 26s
	m := &metrics{
		plans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "plans_total",
			Help: "Plans that reached a state, by state (Queued when a policy produced them; Discarded, Completed or Failed at the end).",
		}, []string{"state"}),
		discards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "plan_discards_total",
			Help: "Plans discarded by the scheduler, by reason.",
		}, []string{"reason"}),
		analyze: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "analyze_duration_seconds",
			Help: "Duration of policies' analyze calls.", Buckets: buckets,
		}, []string{"policy"}),
		plan: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "plan_duration_seconds",
			Help: "Duration of policies' plan calls.", Buckets: buckets,
		}, []string{"policy"}),
		policyErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "policy_errors_total",
			Help: "Failed policy calls, by policy and phase (initialize, analyze, plan).",
		}, []string{"policy", "phase"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "mechanism_results_total",
			Help: "Outcomes of mechanisms' parts of plans, by mechanism and status (Success, Pending, Failed).",
		}, []string{"mechanism", "status"}),
		loadErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "mape", Name: "policy_load_errors_total",
			Help: "Policy files that failed to load, by policy.",
		}, []string{"policy"}),
		inLog: &planLogCollector{e: e, desc: prometheus.NewDesc("mlsysops_mape_plan_log_plans",
			"Plans in the plan log, by state.", []string{"state"}, nil)},
	}
	m.collectors = []prometheus.Collector{m.plans, m.discards, m.analyze, m.plan, m.policyErrs, m.results, m.loadErrs, m.inLog}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register MAPE metrics: %w", err)
		}
	}
	return nil
}

// planLogCollector reports the plan log's plans by state.
type planLogCollector struct {
	e    *Engine
	desc *prometheus.Desc
}

func (c *planLogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *planLogCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[PlanState]int{}
	c.e.mu.Lock()
	c.e.plans.newestFirst(func(p *plan) bool { counts[p.State]++; return true })
	c.e.mu.Unlock()
	for _, s := range PlanStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}
