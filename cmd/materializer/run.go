package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/cache"
	"github.com/normal-oj/noj-materializer/mongodb"
	"github.com/normal-oj/noj-materializer/watch"
)

func cmdRun(ctx context.Context, env *environment, args []string) (err error) {
	fs := newFlags(env, "run", "", `Tail the database's change stream and keep derived values current: the
long-lived sidecar. With no checkpoint it rebuilds first and streams from
the rebuild's start time. Only the instance holding the lease streams;
others stand by. SIGINT/SIGTERM stop it cleanly (exit 0).`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(true)
	if err != nil {
		return err
	}
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
	// From here on stderr carries the daemon's log lines: its fatal error
	// is one more (runMain then prints nothing of its own).
	defer func() {
		if err != nil {
			err = logFatal(log, err)
		}
	}()
	reg, metrics := newRegistry()

	// Serve /healthz and /metrics before connecting, so a slow or absent
	// server shows up as "alive, not ready" rather than as a dead process.
	rd := &readiness{metrics: metrics, maxLag: cfg.ReadyMaxLag}
	srv, err := serveHTTP(ctx, cfg, log, reg, rd)
	if err != nil {
		return err
	}
	defer srv.shutdown()

	var inv watch.Invalidator
	if cfg.RedisURL != "" {
		cache.RouteLibraryLogs(log)
		rc, err := cache.NewRedis(cfg.RedisURL, metrics, log)
		if err != nil {
			return &configError{fmt.Sprintf("%s_REDIS_URL: %v", envPrefix, err)}
		}
		defer rc.Close()
		inv = rc
	}

	log.Info().Str("uri", mongodb.Redact(cfg.MongoDBURI)).Msg("connecting to MongoDB")
	db, err := openMongo(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			log.Info().Msg("stopped while connecting")
			return nil // SIGINT/SIGTERM before anything started: a clean stop
		}
		return err
	}
	defer closeMongo(db, log)
	metrics.MongoDBUp.Set(1) // openMongo's checks reached the server; the leader's lease round trips take over
	rd.connected.Store(true)

	leader := &watch.Leader{
		Leases:  db,
		Owner:   cfg.InstanceID,
		TTL:     cfg.LeaseTTL,
		Metrics: metrics,
		Log:     log,
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{
				Store: db, Feed: db, Checkpoints: db, Cache: inv, Metrics: metrics, Log: log,
				Config: watch.Config{
					BatchSize:          cfg.BatchSize,
					BatchMaxWait:       cfg.BatchMaxWait,
					CheckpointInterval: cfg.CheckpointInterval,
					HistoryLost:        watch.HistoryLostPolicy(cfg.HistoryLost),
					Epoch:              epoch,
					Owner:              cfg.InstanceID,
				},
			}
		},
	}
	if cfg.PendingAge > 0 {
		leader.Pending = &watch.PendingCheck{Source: db, Age: cfg.PendingAge, Metrics: metrics, Log: log}
	}
	log.Info().Str("database", cfg.Database).Str("instance", cfg.InstanceID).Msg("starting")
	if err := leader.Run(ctx); err != nil {
		return runError(err)
	}
	log.Info().Msg("stopped")
	return nil
}

// runError words the engine's exit on lost history, which names the
// policy abstractly, with the variable that chose it.
func runError(err error) error {
	var f *watch.Fault
	if errors.As(err, &f) && f.Class == watch.HistoryLost && f.Action == watch.ActExit {
		return fmt.Errorf("%w (%s_HISTORY_LOST=exit; with rebuild the daemon rebuilds and streams from the rebuild's start time)", err, envPrefix)
	}
	return err
}

// loggedError is an error already logged as a log line; runMain exits
// with its status without printing it again.
type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }

// logFatal logs err as the log line "stopped with an error" (its
// connection hint, if any, in the field hint, its class in class) and
// returns it marked as logged.
func logFatal(log zerolog.Logger, err error) error {
	ev := log.Error()
	var ce *connectError
	if errors.As(err, &ce) {
		// The field names it a hint already: its value without the
		// "hint: " its text line starts with.
		ev = ev.Str("error", strings.TrimSuffix(err.Error(), "\n"+ce.hint)).Str("hint", strings.TrimPrefix(ce.hint, "hint: "))
	} else {
		ev = ev.Err(err)
	}
	if c := watch.ClassOf(err); c != watch.Unclassified {
		ev = ev.Str("class", c.String())
	}
	ev.Msg("stopped with an error")
	return &loggedError{err: err}
}

// openTimeout bounds openMongo's connection and checks (index builds
// excepted), whatever serverSelectionTimeoutMS says.
const openTimeout = 30 * time.Second

// openMongo connects, checks the server and creates indexes if asked to.
// A command that writes (not cfg.readOnly) refuses a server that is not a
// writable primary (mongodb.Config.Writes), and warns when the URI
// connects directly to one server: it will not follow a fail-over.
func openMongo(ctx context.Context, cfg *Config, log zerolog.Logger) (*mongodb.DB, error) {
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	db, err := mongodb.Open(octx, mongodb.Config{
		URI:                   cfg.MongoDBURI,
		Database:              cfg.Database,
		ChangeStreamBatchSize: int32(cfg.BatchSize),
		MaxAwait:              cfg.BatchMaxWait,
		CheckpointCollection:  cfg.CheckpointCollection,
		KeysCollection:        cfg.KeysCollection,
		WriteTimeout:          cfg.WriteTimeout,
		AllowStandalone:       cfg.allowStandalone,
		Writes:                !cfg.readOnly,
	})
	if err != nil {
		return nil, withConnectHint(cfg.MongoDBURI, fmt.Errorf("%s_MONGODB_URI: %w", envPrefix, err)) // err names the redacted URI
	}
	log.Info().Str("uri", mongodb.Redact(cfg.MongoDBURI)).Str("database", cfg.Database).Msg("connected to MongoDB")
	if !cfg.readOnly && strings.EqualFold(mongodb.URIOption(cfg.MongoDBURI, "directConnection"), "true") && !db.Standalone() {
		log.Warn().Msg("directConnection=true: every command goes to this one server, and a fail-over is never followed (writes then fail until a restart); use the replica set's URI with replicaSet=<set name> (fine for a one-node set such as the demo)")
	}
	if cfg.CreateIndexes && !cfg.readOnly {
		// ctx, not octx: the 30 s open deadline would become the build's
		// maxTimeMS and abort it (see EnsureIndexes). listIndexes runs first,
		// so an existing index costs one round trip.
		if err := db.EnsureIndexes(ctx, func(ix mongodb.IndexBuild) {
			if ix.Waiting > 0 {
				log.Warn().Str("collection", ix.Collection).Str("index", ix.Name).Dur("waiting", ix.Waiting).
					Msg("index build waiting for commit quorum (a majority of the data-bearing voting members must build it) or still building a large collection; check rs.status() and db.currentOp({\"command.createIndexes\": {$exists: true}})")
				return
			}
			log.Warn().Str("collection", ix.Collection).Str("index", ix.Name).
				Msg("building a missing index (commitQuorum majority); on a large collection this takes a while (no deadline). To pre-build it off-peak, see docs/install.md#indexes")
		}); err != nil {
			_ = db.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("create indexes (set %s_CREATE_INDEXES=false to skip and create them by hand): %w", envPrefix, err)
		}
	}
	return db, nil
}

func closeMongo(db *mongodb.DB, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("closing the MongoDB client")
	}
}

// httpServer serves /metrics, /healthz and /readyz.
type httpServer struct {
	srv  *http.Server
	done chan struct{}
}

func (h *httpServer) shutdown() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
	<-h.done
}

// serveHTTP starts the HTTP server (nil when HTTP_ADDR is empty).
// /healthz answers 200 while the process runs; /readyz answers as
// readiness.check says.
func serveHTTP(ctx context.Context, cfg *Config, log zerolog.Logger, reg *prometheus.Registry, rd *readiness) (*httpServer, error) {
	if cfg.HTTPAddr == "" {
		return nil, nil
	}
	mux := newMux(reg, rd)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, &configError{fmt.Sprintf("%s_HTTP_ADDR=%q: %v", envPrefix, cfg.HTTPAddr, err)}
	}
	h := &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("HTTP server stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics, /healthz, /readyz")
	return h, nil
}

// newRegistry returns the daemon's metrics registry: the engine's metrics
// (materializer_*) and the Go runtime and process collectors (go_*,
// process_*). The monitoring kit's tests read the exported names from it.
func newRegistry() (*prometheus.Registry, *watch.Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, watch.NewMetrics(reg)
}

// newMux routes /metrics (reg, Prometheus text or protobuf), /healthz
// (200 "ok" while the process runs) and /readyz (rd).
func newMux(reg *prometheus.Registry, rd *readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/readyz", rd)
	return mux
}

// readiness answers /readyz from the engine's gauges and whether the
// start-up connection to MongoDB has completed. Its answers, in order:
//
//	503 "connecting to MongoDB"          openMongo has not returned yet
//	503 "not connected to MongoDB: ..."  the last lease round trip failed (materializer_mongodb_up 0)
//	200 "standby"                        MongoDB reached, another instance holds the lease
//	503 "active, change stream not open" holder rebuilding or reopening its stream
//	503 "active, lag Xs exceeds Y"       holder behind by more than READY_MAX_LAG
//	200 "active, streaming, lag Xs"      holder caught up
//
// The body is one line of text, the reason.
type readiness struct {
	metrics   *watch.Metrics
	maxLag    time.Duration
	connected atomic.Bool // openMongo returned a client
}

// check returns whether the instance is ready, and why.
func (rd *readiness) check() (bool, string) {
	m := rd.metrics
	if !rd.connected.Load() {
		return false, "connecting to MongoDB"
	}
	if gaugeValue(m.MongoDBUp) == 0 {
		return false, "not connected to MongoDB: the last lease round trip failed (see the logs)"
	}
	if gaugeValue(m.LeaseHeld) == 0 {
		return true, "standby"
	}
	if gaugeValue(m.StreamOpen) == 0 {
		return false, "active, change stream not open"
	}
	lag := gaugeValue(m.LagSeconds)
	if lag > rd.maxLag.Seconds() {
		return false, fmt.Sprintf("active, lag %.1fs exceeds %s", lag, rd.maxLag)
	}
	return true, fmt.Sprintf("active, streaming, lag %.1fs", lag)
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	ok, why := rd.check()
	if !ok {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, why)
}

func gaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	if err := g.Write(&d); err != nil || d.Gauge == nil {
		return 0
	}
	return d.Gauge.GetValue()
}
