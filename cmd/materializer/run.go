package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/cache"
	"github.com/normal-oj/noj-materializer/mongodb"
	"github.com/normal-oj/noj-materializer/watch"
)

func cmdRun(ctx context.Context, env *environment, args []string) error {
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := watch.NewMetrics(reg)

	// Serve /healthz and /metrics before connecting, so a slow or absent
	// server shows up as "alive, not ready" rather than as a dead process.
	srv, err := serveHTTP(ctx, cfg, log, reg, metrics)
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
	log.Info().Str("database", cfg.Database).Str("instance", cfg.InstanceID).Msg("starting")
	if err := leader.Run(ctx); err != nil {
		log.Error().Err(err).Msg("stopped with an error")
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// openMongo connects, checks the server and creates indexes if asked to.
func openMongo(ctx context.Context, cfg *Config, log zerolog.Logger) (*mongodb.DB, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := mongodb.Open(octx, mongodb.Config{
		URI:                   cfg.MongoDBURI,
		Database:              cfg.Database,
		ChangeStreamBatchSize: int32(cfg.BatchSize),
		MaxAwait:              cfg.BatchMaxWait,
		CheckpointCollection:  cfg.CheckpointCollection,
		KeysCollection:        cfg.KeysCollection,
		WriteTimeout:          cfg.WriteTimeout,
	})
	if err != nil {
		return nil, withConnectHint(cfg.MongoDBURI, fmt.Errorf("%s_MONGODB_URI: %w", envPrefix, err)) // err names the redacted URI
	}
	log.Info().Str("uri", mongodb.Redact(cfg.MongoDBURI)).Str("database", cfg.Database).Msg("connected to MongoDB")
	if cfg.CreateIndexes {
		if err := db.EnsureIndexes(octx); err != nil {
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
// /healthz answers 200 while the process runs; /readyz answers 200 only
// while the change stream is open and the lag is under READY_MAX_LAG, or
// while this instance is a healthy standby (no lease).
func serveHTTP(ctx context.Context, cfg *Config, log zerolog.Logger, reg *prometheus.Registry, m *watch.Metrics) (*httpServer, error) {
	if cfg.HTTPAddr == "" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := ready(m, cfg.ReadyMaxLag)
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
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

// ready reports readiness from the engine's gauges.
func ready(m *watch.Metrics, maxLag time.Duration) (bool, string) {
	if gaugeValue(m.LeaseHeld) == 0 {
		return true, "standby"
	}
	if gaugeValue(m.StreamOpen) == 0 {
		return false, "change stream not open"
	}
	lag := gaugeValue(m.LagSeconds)
	if lag > maxLag.Seconds() {
		return false, fmt.Sprintf("lag %.1fs exceeds %s", lag, maxLag)
	}
	return true, fmt.Sprintf("streaming, lag %.1fs", lag)
}

func gaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	if err := g.Write(&d); err != nil || d.Gauge == nil {
		return 0
	}
	return d.Gauge.GetValue()
}
