// Command materializer keeps Normal-OJ's derived grading data correct: it
// tails MongoDB change streams and recomputes user counts and homework
// studentStatus entries from the source documents, idempotently.
//
// Usage:
//
//	materializer <command> [flags]
//
// Commands: run, rebuild, verify, status, explain, seed, version. Configuration is
// read from MATERIALIZER_* environment variables. Exit status: 0 success,
// 1 failure (or drift found by verify), 2 usage or configuration error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/rs/zerolog"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit statuses.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 2
)

// errDrift is returned by verify when stored values differ from derived ones.
var errDrift = errors.New("drift found")

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

// environment is what every command gets: its output streams and a way to
// build a logger once the configuration is known.
type environment struct {
	stdin          io.Reader // --dump - (os.Stdin when nil)
	stdout, stderr io.Writer
	getenv         func(string) string
	// progressEvery is how often rebuild and verify report progress
	// (progressEvery, 5 s, when zero; tests shorten it).
	progressEvery time.Duration
}

func commands() []command {
	return []command{
		{"run", "tail the change stream and keep derived values current (the sidecar)", cmdRun},
		{"rebuild", "recompute every derived value once, then exit (online, or offline on a mongodump)", cmdRebuild},
		{"verify", "compare stored derived values with a recompute; exit 1 on drift", cmdVerify},
		{"status", "show the saved checkpoint, its cluster time, the lag and the lease", cmdStatus},
		{"explain", "show step by step how one user's values for one problem are derived (read-only)", cmdExplain},
		{"seed", "generate Normal-OJ-shaped demo data into MongoDB or a mongodump directory", cmdSeed},
		{"version", "print the version", cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// runMain dispatches args to a command and maps its error to an exit status.
func runMain(ctx context.Context, env *environment, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.stdout)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		var ce *configError
		var le *loggedError
		say := func() {
			if !errors.As(err, &le) { // a logged error was printed as a log line
				fmt.Fprintf(env.stderr, "materializer %s: %v\n", c.name, err)
			}
		}
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ce):
			say()
			return exitConfig
		case errors.Is(err, errDrift):
			return exitFail
		default:
			say()
			return exitFail
		}
	}
	fmt.Fprintf(env.stderr, "materializer: unknown command %q\n\n", args[0])
	usage(env.stderr)
	return exitConfig
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "materializer %s: keeps Normal-OJ's derived grading data correct.\n\n", version)
	fmt.Fprintln(w, "Usage: materializer <command> [flags]    (materializer <command> --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nConfiguration (environment):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	_ = envconfig.Usagef("", &Config{}, tw, "{{range .}}  {{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}")
	_ = tw.Flush()
	fmt.Fprintln(w, "\nExit status: 0 success, 1 failure or drift (verify), 2 usage or configuration error.")
}

// newFlags returns a flag set whose --help goes to env.stderr. A bad flag
// prints the usage; its error is printed once, by runMain, after it (the
// flag package's own copy of the message is discarded).
func newFlags(env *environment, name, args string, describe string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fs.SetOutput(env.stderr)
		defer fs.SetOutput(io.Discard)
		fmt.Fprintf(env.stderr, "Usage: materializer %s %s\n\n%s\n", name, args, describe)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			fmt.Fprintln(env.stderr, "\nNo flags; configuration comes from MATERIALIZER_* variables (materializer --help).")
			return
		}
		fmt.Fprintln(env.stderr, "\nFlags (one or two dashes):")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, turning a bad flag into a configuration error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &configError{err.Error()}
	}
	if fs.NArg() > 0 {
		return &configError{fmt.Sprintf("unexpected arguments: %v", fs.Args())}
	}
	return nil
}

// newLogger builds the zerolog logger the configuration asks for.
func newLogger(env *environment, c *Config) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.LogLevel)
	if err != nil || c.LogLevel == "" {
		return zerolog.Nop(), &configError{fmt.Sprintf("%s_LOG_LEVEL must be debug, info, warn or error, got %q", envPrefix, c.LogLevel)}
	}
	var w io.Writer = env.stderr
	if c.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: env.stderr}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("version", version).Logger(), nil
}

func cmdVersion(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "version", "", "Print the version.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "materializer %s\n", version)
	return nil
}
