package watch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Metrics are the engine's Prometheus metrics. Create them with NewMetrics
// on a registry of the caller's (no global registry is used).
type Metrics struct {
	Events          *prometheus.CounterVec // by collection and operation
	BadEvents       prometheus.Counter
	Batches         prometheus.Counter
	KeysRecomputed  *prometheus.CounterVec // kind: user, pair
	Writes          *prometheus.CounterVec // kind: user, entry
	WritesSkipped   *prometheus.CounterVec // kind: user, entry (equal to stored)
	WritesRejected  prometheus.Counter
	EchoesSkipped   prometheus.Counter // change events of the daemon's own writes, skipped (echoes)
	EchoRecords     prometheus.Gauge   // derived paths whose last write's echoes may still come (echoes)
	PenaltyErrors   prometheus.Counter
	Malformed       *prometheus.CounterVec // by collection
	Rebuilds        *prometheus.CounterVec // reason
	Restarts        *prometheus.CounterVec // reason: the error's class (transient, overloaded, unclassified, history_lost, resume_impossible, ...)
	Checkpoints     prometheus.Counter
	LagSeconds      prometheus.Gauge
	StreamOpen      prometheus.Gauge
	LeaseHeld       prometheus.Gauge
	LeaseEpoch      prometheus.Gauge
	CacheDeletes    prometheus.Counter
	CacheFailures   prometheus.Counter
	BatchSeconds    prometheus.Histogram
	UnresolvedPairs prometheus.Counter
	MongoDBUp       prometheus.Gauge       // 1 while the last MongoDB round trip (start-up checks, then each lease acquire/renewal) succeeded
	Decisions       *prometheus.CounterVec // fault policy decisions: class, phase, action
	// Set by PendingCheck on the lease holder; 0 on a standby.
	PendingSubmissions   prometheus.Gauge
	PendingOldestSeconds prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (when non-nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "materializer"
	m := &Metrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_total",
			Help: "Change events received, by collection and operation."}, []string{"collection", "op"}),
		BadEvents: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "bad_events_total",
			Help: "Change events that could not be decoded (handled by a targeted recompute or a rebuild)."}),
		Batches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "batches_total",
			Help: "Batches of change events processed."}),
		KeysRecomputed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "keys_recomputed_total",
			Help: "Dirty keys recomputed from source documents, by kind (user, pair)."}, []string{"kind"}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "writes_total",
			Help: "Derived values written because they differed from the stored ones, by kind (user, entry)."}, []string{"kind"}),
		WritesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "writes_skipped_total",
			Help: "Derived values not written because the stored value was already equal, by kind."}, []string{"kind"}),
		WritesRejected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "writes_rejected_total",
			Help: "Bulk writes with derived values the server refused for good (e.g. a document over 16 MB); reported and skipped."}),
		EchoRecords: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "echo_records",
			Help: "Derived paths whose last acknowledged write is recorded for the echo test: the writes the stream has not passed yet."}),
		EchoesSkipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "echoes_skipped_total",
			Help: "Change events skipped as the echoes of the daemon's own acknowledged writes (same paths, same values, not after the write's operationTime)."}),
		PenaltyErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "penalty_errors_total",
			Help: "Penalty evaluations that failed (gained 0), including running scores that would leave int64."}),
		Malformed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "malformed_documents_total",
			Help: "Source documents (or parts) skipped because they cannot be decoded, by collection."}, []string{"collection"}),
		Rebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rebuilds_total",
			Help: "Full rebuilds run, by reason."}, []string{"reason"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stream_restarts_total",
			Help: "Change stream reopenings, by reason."}, []string{"reason"}),
		Checkpoints: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "checkpoints_total",
			Help: "Resume tokens saved."}),
		LagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "lag_seconds",
			Help: "Now minus the cluster time of the last processed change event."}),
		StreamOpen: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "stream_open",
			Help: "1 while the change stream is open."}),
		LeaseHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "lease_held",
			Help: "1 while this instance holds the lease."}),
		LeaseEpoch: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "lease_epoch",
			Help: "Epoch (fencing token) of the lease this instance holds."}),
		CacheDeletes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "cache_invalidations_total",
			Help: "Back-End high-score cache keys deleted in Redis."}),
		CacheFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "cache_invalidation_failures_total",
			Help: "Failed attempts to delete high-score cache keys."}),
		BatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "batch_seconds",
			Help: "Time to recompute and write one batch.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
		UnresolvedPairs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "unresolved_submissions_total",
			Help: "Submission events whose (user, problem) could not be found (triggers a rebuild)."}),
		// Set by the caller after its start-up checks and by Leader on every
		// lease round trip (each LEASE_TTL/3, bounded by the write timeout),
		// so a lost server shows within one LEASE_TTL.
		MongoDBUp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "mongodb_up",
			Help: "1 while the last round trip to MongoDB (start-up checks, then each lease acquisition or renewal) succeeded; 0 before the first and after a failed one."}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "fault_decisions_total",
			Help: "Errors met, by class, phase and the action the fault policy decided (retry, reopen, rebuild, skip, exit, stand_by, stop)."},
			[]string{"class", "phase", "action"}),
		PendingSubmissions: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pending_submissions",
			Help: "Submissions pending (status -1, not handwritten) longer than MATERIALIZER_PENDING_AGE at the last check: results that never landed. The lease holder checks every minute; 0 on a standby."}),
		PendingOldestSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pending_oldest_seconds",
			Help: "How long the oldest of materializer_pending_submissions has been pending (now minus its lastSend); 0 when none."}),
	}
	// Known label values are exported at 0 from the start: a series born
	// at 1 has no earlier sample, so increase() and rate() in alert rules
	// would miss its first event.
	for _, c := range []string{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem, materialize.CollUser} {
		m.Malformed.WithLabelValues(c)
	}
	for _, r := range []string{"initial", "history_lost", "resume_impossible", "unresolved", "requested"} {
		m.Rebuilds.WithLabelValues(r)
	}
	for _, r := range []string{"transient", "overloaded", "unclassified", "history_lost", "resume_impossible"} {
		m.Restarts.WithLabelValues(r)
	}
	// Every cell of the policy table, with its default action.
	for _, c := range Classes() {
		for _, p := range Phases() {
			m.Decisions.WithLabelValues(c.String(), p.String(), Decide(c, p).String())
		}
	}
	if reg != nil {
		reg.MustRegister(m.Events, m.BadEvents, m.Batches, m.KeysRecomputed, m.Writes, m.WritesSkipped, m.WritesRejected, m.EchoesSkipped, m.EchoRecords,
			m.PenaltyErrors, m.Malformed, m.Rebuilds, m.Restarts, m.Checkpoints, m.LagSeconds, m.StreamOpen,
			m.LeaseHeld, m.LeaseEpoch, m.CacheDeletes, m.CacheFailures, m.BatchSeconds, m.UnresolvedPairs,
			m.MongoDBUp, m.Decisions, m.PendingSubmissions, m.PendingOldestSeconds)
	}
	return m
}

// countDecision counts one decision of the fault policy.
func (m *Metrics) countDecision(f *Fault) {
	m.Decisions.WithLabelValues(f.Class.String(), f.Phase.String(), f.Action.String()).Inc()
}
