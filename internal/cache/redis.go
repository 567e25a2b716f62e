// Package cache invalidates the Back-End's Redis high-score cache after the
// materializer's writes for a (user, problem) pair have landed.
package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// HighScoreKey is the Back-End's cache key of a user's high score on a
// problem: Problem.high_score_key in mongo/problem/problem.py,
// f'PROBLEM_{problem_id}_{username}_HIGH_SCORE'.
func HighScoreKey(p materialize.Pair) string {
	return fmt.Sprintf("PROBLEM_%d_%s_HIGH_SCORE", p.Problem, p.User)
}

// Redis deletes high-score keys. It implements watch.Invalidator: each
// call tries a bounded number of times within a bounded time and counts
// failures; it never blocks the stream for long and never fails it.
type Redis struct {
	client   *redis.Client
	metrics  *watch.Metrics
	log      zerolog.Logger
	Attempts int           // tries per call (3)
	Timeout  time.Duration // per call, all tries included (2s)
}

// NewRedis connects lazily to url (redis://[:password@]host:port[/db];
// database 0 unless the URL names one). The URL's password never appears
// in errors or logs.
func NewRedis(url string, m *watch.Metrics, log zerolog.Logger) (*Redis, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse Redis URL: invalid URL (scheme redis:// or rediss://, host, optional /db)")
	}
	opt.MaxRetries = 0               // retries are ours, bounded by Timeout
	opt.ContextTimeoutEnabled = true // honour Timeout even against a hung server
	opt.DialTimeout = time.Second
	opt.ReadTimeout = time.Second
	opt.WriteTimeout = time.Second
	if m == nil {
		m = watch.NewMetrics(nil)
	}
	return &Redis{client: redis.NewClient(opt), metrics: m, log: log, Attempts: 3, Timeout: 2 * time.Second}, nil
}

// Close releases the client.
func (r *Redis) Close() error { return r.client.Close() }

// Invalidate deletes the high-score key of every pair (one DEL per try).
func (r *Redis) Invalidate(ctx context.Context, pairs []materialize.Pair) {
	if len(pairs) == 0 {
		return
	}
	keys := make([]string, len(pairs))
	for i, p := range pairs {
		keys[i] = HighScoreKey(p)
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	var err error
	for attempt := 1; attempt <= max(1, r.Attempts); attempt++ {
		if err = r.client.Del(ctx, keys...).Err(); err == nil {
			r.metrics.CacheDeletes.Add(float64(len(keys)))
			return
		}
		r.metrics.CacheFailures.Inc()
		if ctx.Err() != nil {
			break
		}
		t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	// The derived writes have landed; a stale cache entry only delays the
	// Back-End's high score until its own expiry or the next submission.
	r.log.Warn().Err(err).Int("keys", len(keys)).Msg("could not delete high-score cache keys")
}

// RouteLibraryLogs sends go-redis's own log lines (connection pool
// warnings, which it otherwise prints unstructured to stderr) to log at
// warn level. go-redis keeps its logger in a package variable, so the
// binary calls this once, at start-up.
func RouteLibraryLogs(log zerolog.Logger) {
	redis.SetLogger(libLogger{log})
}

type libLogger struct{ log zerolog.Logger }

func (l libLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn().Str("component", "go-redis").Msg(fmt.Sprintf(format, v...))
}
