package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/normal-oj/noj-materializer/mongodb"
	"github.com/normal-oj/noj-materializer/watch"
)

// envPrefix is the prefix of every configuration variable.
const envPrefix = "MATERIALIZER"

// Config is the daemon's configuration, read from MATERIALIZER_*
// environment variables (see the README's configuration table).
type Config struct {
	MongoDBURI           string        `envconfig:"MATERIALIZER_MONGODB_URI" desc:"MongoDB connection string of a replica set (required; never logged with its password)"`
	Database             string        `envconfig:"MATERIALIZER_DATABASE" default:"normal-oj" desc:"Back-End's database"`
	BatchSize            int           `envconfig:"MATERIALIZER_BATCH_SIZE" default:"500" desc:"change events per batch at most"`
	BatchMaxWait         time.Duration `envconfig:"MATERIALIZER_BATCH_MAX_WAIT" default:"200ms" desc:"a batch closes this long after its first event"`
	CheckpointInterval   time.Duration `envconfig:"MATERIALIZER_CHECKPOINT_INTERVAL" default:"10s" desc:"a quiet stream saves its postBatchResumeToken this often"`
	CheckpointCollection string        `envconfig:"MATERIALIZER_CHECKPOINT_COLLECTION" default:"materializer_checkpoints" desc:"collection of the checkpoint and the lease"`
	KeysCollection       string        `envconfig:"MATERIALIZER_KEYS_COLLECTION" default:"materializer_submission_keys" desc:"collection of the submission key index"`
	HistoryLost          string        `envconfig:"MATERIALIZER_HISTORY_LOST" default:"rebuild" desc:"when the resume token left the oplog: rebuild or exit"`
	CreateIndexes        bool          `envconfig:"MATERIALIZER_CREATE_INDEXES" default:"true" desc:"create the indexes the daemon reads with at start-up"`
	LogLevel             string        `envconfig:"MATERIALIZER_LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat            string        `envconfig:"MATERIALIZER_LOG_FORMAT" default:"json" desc:"json or console"`
	HTTPAddr             string        `envconfig:"MATERIALIZER_HTTP_ADDR" default:"127.0.0.1:9464" desc:"listen address of /metrics, /healthz and /readyz (empty: off; the image sets :9464)"`
	ReadyMaxLag          time.Duration `envconfig:"MATERIALIZER_READY_MAX_LAG" default:"60s" desc:"/readyz fails when the stream lags more than this"`
	InstanceID           string        `envconfig:"MATERIALIZER_INSTANCE_ID" desc:"instance id (default hostname-pid); the lease owner adds a random per-process suffix"`
	LeaseTTL             time.Duration `envconfig:"MATERIALIZER_LEASE_TTL" default:"15s" desc:"lease duration; a standby takes over within about this long"`
	RedisURL             string        `envconfig:"MATERIALIZER_REDIS_URL" desc:"Back-End's Redis; when set, high-score cache keys are deleted after writes land"`
	WriteTimeout         time.Duration `envconfig:"MATERIALIZER_WRITE_TIMEOUT" default:"5s" desc:"timeout of each bulk write, checkpoint and lease write (positive, under half of LEASE_TTL)"`
	PendingAge           time.Duration `envconfig:"MATERIALIZER_PENDING_AGE" default:"30m" desc:"report submissions pending (status -1) longer than this: results that never landed (0: off; else at least 5m)"`

	// allowStandalone is set by the commands that need no change stream
	// (rebuild, verify, status, seed), not by the environment: openMongo
	// then accepts a standalone mongod. run leaves it false.
	allowStandalone bool
	// readOnly is set by the commands that write nothing (verify, status,
	// rebuild --dry-run): openMongo then builds no index, whatever
	// CREATE_INDEXES says. A createIndexes is a write, needs the
	// createIndex privilege, and runs without a deadline (see
	// mongodb.DB.EnsureIndexes): on a large collection it would hold the
	// command for as long as the build takes.
	readOnly bool
}

// configError is a configuration problem: exit status 2.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// offlineConfig is the part of Config an offline (--dump) command uses:
// only these variables are read, so a setting it never uses cannot fail it.
type offlineConfig struct {
	Database  string `envconfig:"MATERIALIZER_DATABASE" default:"normal-oj"`
	LogLevel  string `envconfig:"MATERIALIZER_LOG_LEVEL" default:"info"`
	LogFormat string `envconfig:"MATERIALIZER_LOG_FORMAT" default:"json"`
}

// loadOfflineConfig reads and validates the settings of an offline
// command (the database directory's name and logging) and nothing else.
func loadOfflineConfig() (*Config, error) {
	var o offlineConfig
	if err := envconfig.Process("", &o); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return nil, &configError{fmt.Sprintf("invalid %s=%q: %v", pe.KeyName, pe.Value, pe.Err)}
		}
		return nil, &configError{err.Error()}
	}
	if err := checkDatabaseName(o.Database); err != nil {
		return nil, err
	}
	switch o.LogFormat {
	case "json", "console":
	default:
		return nil, &configError{fmt.Sprintf("%s_LOG_FORMAT must be json or console, got %q", envPrefix, o.LogFormat)}
	}
	return &Config{Database: o.Database, LogLevel: o.LogLevel, LogFormat: o.LogFormat}, nil
}

// loadConfig reads and validates the configuration. needMongo says whether
// the command talks to MongoDB (offline dump commands do not).
func loadConfig(needMongo bool) (*Config, error) {
	var c Config
	// Tags carry the full names and the prefix is empty: with a prefix,
	// envconfig would fall back to the bare name (BATCH_SIZE), letting
	// unrelated variables configure the daemon.
	if err := envconfig.Process("", &c); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return nil, &configError{fmt.Sprintf("invalid %s=%q: %v", pe.KeyName, pe.Value, pe.Err)}
		}
		return nil, &configError{err.Error()}
	}
	if needMongo && c.MongoDBURI == "" {
		return nil, &configError{envPrefix + "_MONGODB_URI is required: the replica set's URI, e.g. mongodb://db1:27017,db2:27017/?replicaSet=rs0 (the demo's one-node set from its host: mongodb://127.0.0.1:27017/?directConnection=true; see README)"}
	}
	if c.MongoDBURI != "" && !strings.HasPrefix(c.MongoDBURI, "mongodb://") && !strings.HasPrefix(c.MongoDBURI, "mongodb+srv://") {
		return nil, &configError{envPrefix + "_MONGODB_URI must start with mongodb:// or mongodb+srv://"}
	}
	switch {
	case c.BatchSize <= 0:
		return nil, &configError{fmt.Sprintf("%s_BATCH_SIZE must be positive, got %d", envPrefix, c.BatchSize)}
	case c.BatchMaxWait <= 0:
		return nil, &configError{envPrefix + "_BATCH_MAX_WAIT must be positive"}
	case c.CheckpointInterval <= 0:
		return nil, &configError{envPrefix + "_CHECKPOINT_INTERVAL must be positive"}
	case c.LeaseTTL < time.Second:
		return nil, &configError{envPrefix + "_LEASE_TTL must be at least 1s"}
	}
	if err := watch.CheckWriteTimeout(c.LeaseTTL, c.WriteTimeout); err != nil {
		return nil, &configError{fmt.Sprintf("%s_WRITE_TIMEOUT=%s with %s_LEASE_TTL=%s: %v", envPrefix, c.WriteTimeout, envPrefix, c.LeaseTTL, err)}
	}
	if c.ReadyMaxLag <= 0 {
		return nil, &configError{envPrefix + "_READY_MAX_LAG must be positive"}
	}
	if err := checkPendingAge(envPrefix+"_PENDING_AGE", c.PendingAge, "off"); err != nil {
		return nil, err
	}
	if err := checkDatabaseName(c.Database); err != nil {
		return nil, err
	}
	if err := checkCollections(&c); err != nil {
		return nil, err
	}
	if needMongo {
		// Parse the URI the way the driver will, so a malformed one is a
		// configuration error (2) rather than a failure to connect (1).
		// Offline commands do not parse it: a mongodb+srv URI would be
		// resolved through DNS for nothing.
		if err := mongodb.CheckURI(c.MongoDBURI); err != nil {
			return nil, &configError{fmt.Sprintf("%s_MONGODB_URI cannot be parsed: %v", envPrefix, err)}
		}
		if err := checkURIOptions(c.MongoDBURI); err != nil {
			return nil, err
		}
	}
	switch watch.HistoryLostPolicy(c.HistoryLost) {
	case watch.OnHistoryLostRebuild, watch.OnHistoryLostExit:
	default:
		return nil, &configError{fmt.Sprintf("%s_HISTORY_LOST must be rebuild or exit, got %q", envPrefix, c.HistoryLost)}
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		return nil, &configError{fmt.Sprintf("%s_LOG_FORMAT must be json or console, got %q", envPrefix, c.LogFormat)}
	}
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		c.InstanceID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return &c, nil
}

// checkCollections refuses a checkpoint or key-index collection the
// daemon must not write to (mongodb.CheckCollections), naming the
// variable.
func checkCollections(c *Config) error {
	err := mongodb.CheckCollections(c.CheckpointCollection, c.KeysCollection)
	var ce *mongodb.CollectionError
	if !errors.As(err, &ce) {
		return err
	}
	name := envPrefix + "_CHECKPOINT_COLLECTION"
	if ce.Keys {
		name = envPrefix + "_KEYS_COLLECTION"
	}
	switch {
	case ce.Same:
		return &configError{fmt.Sprintf("%s_CHECKPOINT_COLLECTION and %s: %v", envPrefix, name, err)}
	case ce.Name == "":
		return &configError{fmt.Sprintf("%s %v", name, err)}
	}
	return &configError{fmt.Sprintf("%s=%q: %v", name, ce.Name, err)}
}

// minPendingAge is the least pending age worth reporting: the Back-End
// refuses to rejudge a submission sent less than 5 minutes ago ("haven't
// be judged", 403).
const minPendingAge = 5 * time.Minute

// checkPendingAge refuses a pending age other than 0 or at least
// minPendingAge; name is the variable or flag that set it, zero what 0
// means there.
func checkPendingAge(name string, d time.Duration, zero string) error {
	if d != 0 && d < minPendingAge {
		return &configError{fmt.Sprintf("%s must be 0 (%s) or at least %s (the Back-End refuses to rejudge a submission sent less than 5 minutes ago), got %s", name, zero, minPendingAge, d)}
	}
	return nil
}
