// Package cli is gapless's command line: one file per subcommand, each a thin
// layer over the packages that tests call directly.
//
// Exit codes: 0 success, 1 failure, 2 usage error. Errors are printed as one
// clear message (never a stack trace); a failure in a project's files names
// the file, line and column.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Env is what a command may touch of its process: output streams, the clock
// and the working directory. Tests supply their own.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// Stdin answers the plan's confirmation prompt; nil reads nothing.
	Stdin io.Reader
	// Clock is the wall clock for records (created_at, promoted_at) and the
	// default execution time; nil is the real clock (see globals.clock).
	Clock clockwork.Clock
	Getwd func() (string, error)
	// Interactive says that stdin and stdout are a terminal: plan then asks
	// before applying. Tests leave it false.
	Interactive bool
	// StderrTerminal says that stderr is a terminal: long work then shows
	// progress bars there. Never set it for a pipe or a file.
	StderrTerminal bool
	// WaitClock paces waiting for a DuckDB warehouse file another process
	// holds (--lock-wait); nil is the real clock. Tests inject one so that
	// they wait without sleeping.
	WaitClock clockwork.Clock
}

// UsageError is a mistake in how a command was called (unknown flag, bad
// argument count, unparsable flag value). It exits with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// globals are the flags every command takes.
type globals struct {
	env           Env
	projectDir    string
	logFormat     string
	logLevel      string
	executionTime string
	lockWait      time.Duration
	verbose       int
	level         slog.Level
	log           *slog.Logger
}

// execTime returns --execution-time, or the clock's now when it is not set.
// Every command takes it so that time is injectable.
func (g *globals) execTime() (time.Time, error) {
	if g.executionTime == "" {
		return g.now(), nil
	}
	t, err := model.ParseTime(g.executionTime)
	if err != nil {
		return time.Time{}, usagef("--execution-time: %w", err)
	}
	return t, nil
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	g := &globals{env: env}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(env.Stderr, "gapless: "+strings.TrimPrefix(err.Error(), "gapless: "))
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "gapless",
		Short:         "Deploy SQL data pipelines without gaps and without lost rows",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.setupLogging(cmd)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	pf := root.PersistentFlags()
	pf.StringVarP(&g.projectDir, "project", "p", "", "project folder (default: found from the working directory upwards, like git)")
	pf.StringVar(&g.logFormat, "log-format", "text", "structured log format: text or json")
	pf.StringVar(&g.logLevel, "log-level", "warn", "least important log records shown: debug, info, warn or error "+
		"(info with --log-format json and for the scheduler daemon)")
	pf.CountVarP(&g.verbose, "verbose", "v", "show info records, per batch too (-vv: debug); --log-level overrides it")
	pf.StringVar(&g.executionTime, "execution-time", "", "the time the command acts at (default: now), e.g. 2024-03-01 or 2024-03-01T12:00:00Z")
	pf.DurationVar(&g.lockWait, "lock-wait", 30*time.Second, "how long to wait for another process holding the DuckDB warehouse file (0: do not wait)")
	root.AddCommand(
		newModelsCmd(g),
		newInitCmd(g),
		newPlanCmd(g),
		newApplyCmd(g),
		newRollbackCmd(g),
		newRunCmd(g),
		newIngestCmd(g),
		newSourcesCmd(g),
		newSchedulerCmd(g),
		newServeCmd(g),
		newGitHubCmd(g),
		newGateCmd(g),
		newStatusCmd(g),
		newDebtCmd(g),
		newEnvironmentsCmd(g),
		newInvalidateCmd(g),
		newJanitorCmd(g),
		newRenderCmd(g),
		newQueryCmd(g),
		newMigrateCmd(g),
		newSimulateCmd(g),
		newVersionCmd(g),
		newCreateExternalModelsCmd(g),
		newTestCmd(g), newCreateTestCmd(g),
		newAuditCmd(g),
		newTableDiffCmd(g),
		newDagCmd(g),
		newInfoCmd(g),
		newEvaluateCmd(g),
		newFormatCmd(g),
	)
	// --version prints what `gapless version` prints.
	root.Version = versionText()
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().Bool("version", false, "print the version and exit (as gapless version)")
	// Unknown subcommands and bad argument counts are usage errors too; a
	// mistyped command gets the commands it is close to (cobra's edit
	// distance and prefix rule).
	root.SuggestionsMinimumDistance = 2
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		hint := ""
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			hint = `; did you mean "` + strings.Join(s, `" or "`) + `"?`
		}
		return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), hint)
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

// setupLogging sets the command's logger from --log-format, --log-level
// and -v. A person reading text output sees warnings and errors only: what a
// command did is its human output on stdout (what was backfilled, which
// policy promoted what, what was accepted as debt), and per-batch records
// would bury it. Machines get every info record: with --log-format json,
// and from the scheduler daemon, whose log is its output.
func (g *globals) setupLogging(cmd *cobra.Command) error {
	switch g.logFormat {
	case "text", "json":
	default:
		return usagef("--log-format must be text or json, not %q", g.logFormat)
	}
	name := g.logLevel
	switch {
	case cmd.Flags().Changed("log-level"):
	case g.verbose == 1:
		name = "info"
	case g.verbose > 1:
		name = "debug"
	case g.logFormat == "json" || cmd.Name() == "scheduler":
		name = "info"
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(name)); err != nil {
		return usagef("--log-level must be debug, info, warn or error, not %q", name)
	}
	g.level = level
	g.log = g.loggerTo(g.env.Stderr)
	return nil
}

// loggerTo is a logger with the chosen format and level writing to w (the
// progress bars' writer while they run, so that records print above them).
func (g *globals) loggerTo(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: g.level, ReplaceAttr: shortPolicyErrors}
	if g.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// rangeArgs is cobra.RangeArgs that reports a usage error.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			if lo == hi {
				return usagef("%s takes %d argument(s), got %d", cmd.CommandPath(), lo, len(args))
			}
			return usagef("%s takes %d to %d arguments, got %d", cmd.CommandPath(), lo, hi, len(args))
		}
		return nil
	}
}

// envArg is a command's optional ENV argument: prod when absent, and
// checked to be a valid environment name.
func envArg(args []string) (string, error) {
	env := plan.Prod
	if len(args) == 1 {
		env = args[0]
	}
	if err := checkEnvName(env); err != nil {
		return "", err
	}
	return env, nil
}

// shortPolicyErrors logs a refused promotion (*promotion.Error) by its models
// and reason codes only. The full explanation of each rejection (the rule,
// the range, the frontiers and the policy or flag that would have helped) is
// the command's error, printed once, last; the apply's per-model
// "promotion verdict" records carry every stable field for grep and
// dashboards.
func shortPolicyErrors(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	err, ok := a.Value.Any().(error)
	var perr *promotion.Error
	if !ok || !errors.As(err, &perr) {
		return a
	}
	parts := make([]string, len(perr.Verdicts))
	for i, v := range perr.Verdicts {
		parts[i] = strings.TrimSpace(v.Model + " [" + string(v.Reason) + "]")
	}
	return slog.String(a.Key, "promotion refused: "+strings.Join(parts, ", "))
}

// didYouMean is "; did you mean X?" for the name in names closest to word
// (model/suggest's rule), or "" when none is close.
func didYouMean(word string, names []string) string {
	if s, ok := suggest.Closest(word, names); ok {
		return fmt.Sprintf("; did you mean %s?", s)
	}
	return ""
}
