// Command materializer keeps Normal-OJ's derived grading data correct: it
// tails MongoDB change streams and recomputes user counts and homework
// studentStatus entries from the source documents, idempotently.
//
// Usage:
//
//	materializer <command> [flags]
//
// Commands: run, rebuild, verify, status, pending, explain, seed, version (also
// --version). Configuration is
// read from MATERIALIZER_* environment variables. Exit status: 0 success,
// 1 failure (or drift found by verify), 2 usage or configuration error,
// 3 verify found no drift but skipped malformed documents or compared
// nothing, 130 interrupted by SIGINT, 143 by SIGTERM (a one-shot command; run exits
// 0 after a clean stop).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit statuses.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 2
	// exitUnchecked: verify found no drift but could not check everything
	// (documents skipped as malformed, or nothing compared), so that a
	// nightly verify alerts on another app's dump or a broken export.
	exitUnchecked = 3
)

// errDrift is returned by verify when stored values differ from derived ones.
var errDrift = errors.New("drift found")

// errUnchecked is wrapped by verify's error when it found no drift but
// skipped malformed documents or compared nothing.
var errUnchecked = errors.New("not everything was checked")

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
	// progressEvery is how often rebuild and verify report progress
	// (progressEvery, 5 s, when zero; tests shorten it).
	progressEvery time.Duration
	// output is the file or directory a command writes (rebuild --out,
	// seed --out or --archive), set when it starts writing, so that an
	// interruption can say its partial output was removed.
	output string
}

func commands() []command {
	return []command{
		{"run", "tail the change stream and keep derived values current (the sidecar)", cmdRun},
		{"rebuild", "recompute every derived value once, then exit (online, or offline on a mongodump)", cmdRebuild},
		{"verify", "compare stored derived values with a recompute; exit 1 on drift", cmdVerify},
		{"status", "show the saved checkpoint, its cluster time, the lag, the lease and pending submissions", cmdStatus},
		{"pending", "list submissions whose judging result never landed, with the rejudge call for each", cmdPending},
		{"explain", "show step by step how one user's values for one problem are derived (read-only)", cmdExplain},
		{"seed", "generate Normal-OJ-shaped demo data into MongoDB, a mongodump directory or an archive", cmdSeed},
		{"version", "print the version (also: materializer --version)", cmdVersion},
	}
}

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	oneShot := len(os.Args) < 2 || os.Args[1] != "run"
	go onSignals(sigs, cancel, signalHandler{stderr: os.Stderr, exit: os.Exit, now: time.Now, notice: oneShot})
	if oneShot {
		// A one-shot command whose output was cut (verify ARCHIVE | head)
		// gets EPIPE on its writes rather than dying by SIGPIPE at the
		// first one, so it still removes what it unpacked or left partial,
		// and exits with its own status. (run keeps the default: a
		// daemon whose log pipe broke stops.)
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	}
	code := runMain(ctx, &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	os.Exit(code)
}

// interruptedError is the cause of the context's cancellation by a signal.
type interruptedError struct{ sig os.Signal }

func (e *interruptedError) Error() string { return "interrupted by " + signalName(e.sig) }

// signalName is SIGINT or SIGTERM (os.Signal's String is "interrupt").
func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// signalExit is the exit status of a command stopped by sig: 128 plus the
// signal's number, as a shell reports a process the signal killed.
func signalExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFail
}

// signalGrace is how long after the first signal a repeat of the same
// signal is taken for a copy of it rather than for an operator's second
// one. GNU timeout (and a terminal's Ctrl-C under it) sends the signal to
// the process and again to its process group, microseconds apart; the
// gap measured here also holds the scheduling delay of a loaded machine.
// A person who sees nothing happen takes longer than a second to press
// Ctrl-C again, and that press still exits at once.
const signalGrace = time.Second

// signalHandler is how onSignals answers: main's writes to os.Stderr,
// exits with os.Exit and reads time.Now (whose readings compare by the
// monotonic clock).
type signalHandler struct {
	stderr io.Writer
	exit   func(int)
	now    func() time.Time
	// notice: say on the first signal that the command is stopping (a
	// one-shot command; run's stderr is its log, which says so).
	notice bool
}

// onSignals cancels the commands' context on the first signal (every
// phase stops, removes its partial output and exits with signalExit), and
// exits at once on a second, for an operator who will not wait for the
// cleanup. A repeat of the first signal within signalGrace is ignored.
func onSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, h signalHandler) {
	first := <-sigs
	at := h.now()
	if h.notice {
		fmt.Fprintf(h.stderr, "materializer: %s: stopping (a second signal %s or more later exits at once, without cleaning up)\n", signalName(first), signalGrace)
	}
	cancel(&interruptedError{first})
	for second := range sigs {
		if second == first && h.now().Sub(at) < signalGrace {
			continue // the same signal sent twice (timeout: to the process, then to its group)
		}
		fmt.Fprintf(h.stderr, "materializer: %s again: exiting at once (may be left: a hidden .partial-* output beside or inside the output, an unpacked archive in %s)\n",
			signalName(second), filepath.Join(os.TempDir(), "materializer-archive-*"))
		h.exit(signalExit(second))
		return
	}
}

// runMain dispatches args to a command and maps its error to an exit status.
func runMain(ctx context.Context, env *environment, args []string) int {
	if len(args) == 2 && args[0] == "help" {
		if args[1] == "help" {
			args = args[:1]
		} else {
			args = []string{args[1], "--help"} // materializer help run: run's help
		}
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...) // as most tools take it
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			usage(env.stderr)
			return exitConfig
		}
		if len(args) > 1 {
			fmt.Fprintf(env.stderr, "materializer %s: unexpected arguments %q\n", args[0], args[1:])
			return exitConfig
		}
		usage(env.stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		var ce *configError
		var ie *interruptedError
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
		case c.name != "run" && errors.As(context.Cause(ctx), &ie) && !reported(err):
			// A one-shot command cut short: no report, the work was not
			// done, and what it wrote is removed. (run stops cleanly on a
			// signal, exit 0; its errors keep their status.)
			removed := ""
			if env.output != "" {
				removed = "; the partial output for " + env.output + " removed"
			}
			fmt.Fprintf(env.stderr, "materializer %s: %v; stopped (no report%s)\n", c.name, ie, removed)
			return signalExit(ie.sig)
		case errors.As(err, &ce):
			say()
			return exitConfig
		case errors.Is(err, errDrift):
			return exitFail
		case errors.Is(err, errUnchecked):
			say()
			return exitUnchecked
		default:
			say()
			return exitFail
		}
	}
	fmt.Fprintf(env.stderr, "materializer: unknown command %q\n\n", args[0])
	usage(env.stderr)
	return exitConfig
}

// reported reports whether err is a verdict, returned only after the
// command printed its whole report: it stands even when a signal came
// after the report.
func reported(err error) bool {
	return errors.Is(err, errDrift) || errors.Is(err, errUnchecked)
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
	fmt.Fprintln(w, "\nExit status: 0 success, 1 failure or drift (verify), 2 usage or configuration error,")
	fmt.Fprintln(w, "3 verify unchecked (malformed documents skipped, or nothing compared),")
	fmt.Fprintln(w, "130 interrupted by SIGINT, 143 by SIGTERM (partial output removed; a second signal 1s or more later exits at once).")
}

// newFlags returns a flag set whose usage goes to env.stdout for --help
// (exit 0) and to env.stderr after a bad flag (exit 2). A bad flag's
// error is printed once, by runMain, after the usage (the flag package's
// own copy of the message is dropped).
func newFlags(env *environment, name, args string, describe string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	u := &usageOutput{}
	fs.SetOutput(u)
	fs.Usage = func() {
		u.Reset() // the flag package's message, printed just before
		fmt.Fprintf(u, "Usage: %s\n\n%s\n", strings.TrimSpace("materializer "+name+" "+args), describe)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		switch {
		case n == 0 && name == "version":
			fmt.Fprintln(u, "\nNo flags.")
		case n == 0:
			fmt.Fprintln(u, "\nNo flags; configuration comes from MATERIALIZER_* variables (materializer --help).")
		default:
			fmt.Fprintln(u, "\nFlags (one or two dashes):")
			fs.PrintDefaults()
		}
	}
	u.stdout, u.stderr = env.stdout, env.stderr
	return fs
}

// usageOutput collects a flag set's usage until parseFlags knows where it
// goes.
type usageOutput struct {
	bytes.Buffer
	stdout, stderr io.Writer
}

// parseFlags parses args, turning a bad flag into a configuration error.
// Repeating a flag is refused (flag keeps the last value silently).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if u, ok := fs.Output().(*usageOutput); ok && u.Len() > 0 {
		w := u.stderr
		if errors.Is(err, flag.ErrHelp) {
			w = u.stdout
		}
		_, _ = u.WriteTo(w)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &configError{err.Error()}
	}
	if fs.NArg() > 0 {
		return &configError{fmt.Sprintf("unexpected arguments: %v", fs.Args())}
	}
	if d := repeatedFlag(fs, args); d != "" {
		return &configError{fmt.Sprintf("--%s given more than once (only one value is used)", d)}
	}
	return nil
}

// repeatedFlag returns the name of a flag args set twice, or "".
func repeatedFlag(fs *flag.FlagSet, args []string) string {
	seen := make(map[string]bool)
	for _, a := range args {
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			continue // flags end at the first non-flag (NArg is 0 here)
		}
		name := strings.TrimLeft(a, "-")
		name, _, _ = strings.Cut(name, "=")
		if fs.Lookup(name) == nil {
			continue // a value of the previous flag, e.g. --user -x
		}
		if seen[name] {
			return name
		}
		seen[name] = true
	}
	return ""
}

// logLevel is the zerolog level of a MATERIALIZER_LOG_LEVEL value: lower
// case, like every other variable's words. (zerolog.ParseLevel also takes
// trace, fatal, panic, disabled and numbers: disabled would silence the
// daemon's fatal error.)
func logLevel(s string) (zerolog.Level, bool) {
	switch s {
	case "debug":
		return zerolog.DebugLevel, true
	case "info":
		return zerolog.InfoLevel, true
	case "warn":
		return zerolog.WarnLevel, true
	case "error":
		return zerolog.ErrorLevel, true
	}
	return zerolog.Disabled, false
}

// newLogger builds the zerolog logger the configuration asks for.
func newLogger(env *environment, c *Config) (zerolog.Logger, error) {
	lvl, ok := logLevel(c.LogLevel)
	if !ok {
		return zerolog.Nop(), &configError{fmt.Sprintf("%s_LOG_LEVEL must be debug, info, warn or error, got %q", envPrefix, c.LogLevel)}
	}
	var w io.Writer = env.stderr
	if c.LogFormat == "console" {
		// Colour codes only for a person at a terminal: a file or a log
		// collector would keep them as noise.
		w = zerolog.ConsoleWriter{Out: env.stderr, NoColor: !isTerminal(env.stderr)}
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

// isTerminal reports whether s (an output or input stream) is a terminal.
func isTerminal(s any) bool {
	f, ok := s.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
