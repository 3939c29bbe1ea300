package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/scheduler"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse"
)

func newSchedulerCmd(g *globals) *cobra.Command {
	var (
		listen                   string
		tick, jitter, ttl, grace time.Duration
		once, ingestSources      bool
	)
	cmd := &cobra.Command{
		Use:   "scheduler [ENV...]",
		Short: "Keep environments fresh: run their due work on every tick until stopped (default prod)",
		Long: `Runs, every --tick, the due work of every model the environments serve
(default prod), as 'gapless run' does, until SIGINT or SIGTERM.

A tick with nothing due reads state only and never opens the warehouse; a
tick with work opens it and closes it again when done, so a plan or apply
from another shell waits at most --lock-wait for the DuckDB file.

Several daemons may share one state store: each model version is run under a
lease, so no two daemons (and no deploy under the lock policy) compute one
version at once; a leased version is deferred to a later tick.

On SIGINT/SIGTERM no further model starts; the batch in flight may finish
within --grace, then it is cancelled (it rolls back and records nothing).
The exit status is 0 after a clean stop.

Each tick first lands the project's sources (sources/*.yaml), as one
'gapless ingest --once' pass, on the warehouse the tick's runs then use:
one process holds the DuckDB file for both, and the runs compute what the
sources' new watermarks cover. --ingest=false leaves the sources to
another process ('gapless ingest'). The source files are read at start.

--listen serves /healthz and Prometheus /metrics. --once runs one tick and
exits (for cron and tests); only then may --execution-time be given.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			envs := args
			if len(envs) == 0 {
				envs = []string{plan.Prod}
			}
			for _, e := range envs {
				if err := checkEnvName(e); err != nil {
					return err
				}
			}
			if g.executionTime != "" && !once {
				return usagef("--execution-time needs --once: the daemon runs at the clock's time")
			}
			if tick <= 0 || jitter < 0 || ttl <= 0 {
				return usagef("--tick and --lease-ttl must be positive and --jitter not negative")
			}
			if grace <= 0 {
				grace = -1 // cancel the batch in flight at once
			}
			var exec time.Time
			if once {
				if exec, err = g.execTime(); err != nil {
					return err
				}
			}
			cfg, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			var in *scheduler.Ingest
			if ingestSources {
				if in, err = schedulerIngest(g, cfg.Dir); err != nil {
					return err
				}
			}
			// A warehouse that cannot land sources is refused before the
			// first tick, so no pass stages a batch in state that it can
			// never apply.
			if in != nil {
				if err := checkCanIngest(ctx, cfg); err != nil {
					return fmt.Errorf("%w; the project defines sources: run the scheduler with --ingest=false to run its models only", err)
				}
			}
			parser, err := sqlparse.Open()
			if err != nil {
				return fmt.Errorf("starting the SQL parser: %w", err)
			}
			defer parser.Close()
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			s, err := scheduler.New(scheduler.Params{
				Envs: envs, Store: b.Store, Parser: parser, ProjectDir: cfg.Dir,
				OpenEngine: func(ctx context.Context) (warehouse.Engine, error) { return g.openEngine(ctx, cfg) },
				// No Clock: the daemon ticks, and its leases expire, on the
				// wall clock (scheduler.New's default), not Env.Clock.
				Tick: tick, Jitter: jitter, Grace: grace, ExecutionTime: exec,
				Lease:      lease.Options{TTL: ttl},
				Logger:     g.log,
				Registerer: reg,
				Ingest:     in,
				Statements: environmentStatements(cfg),
			})
			if err != nil {
				return err
			}
			if listen != "" {
				stop, err := serveHTTP(ctx, s, listen)
				if err != nil {
					return err
				}
				defer func() { err = errors.Join(err, stop()) }()
			}
			if once {
				res, err := s.Tick(ctx)
				printTick(g, res)
				return err
			}
			if err := s.Run(ctx); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "Scheduler stopped after %d ticks.\n", s.Health().Ticks)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "", "serve /healthz and /metrics on this address, e.g. :9464 (default: no HTTP)")
	f.DurationVar(&tick, "tick", scheduler.DefaultTick, "how often to look for due work")
	f.DurationVar(&jitter, "jitter", 0, "delay each tick by a random duration below this, to spread daemons out")
	f.DurationVar(&ttl, "lease-ttl", lease.DefaultTTL, "lifetime of a version lease (renewed every third of it); a dead daemon's work is taken over after it")
	f.DurationVar(&grace, "grace", scheduler.DefaultGrace, "on SIGINT/SIGTERM, how long the batch in flight may take to finish before it is cancelled (0: at once)")
	f.BoolVar(&once, "once", false, "run one tick and exit")
	f.BoolVar(&ingestSources, "ingest", true, "land the project's sources before each tick's runs")
	return cmd
}

// schedulerIngest reads the project's source files for the daemon's ingest
// pass; nil when the project defines none.
func schedulerIngest(g *globals, root string) (*scheduler.Ingest, error) {
	defs, err := source.LoadDir(root, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if len(defs) == 0 {
		return nil, nil
	}
	sources := make(map[string]*source.Definition, len(defs))
	for _, d := range defs {
		sources[d.Name] = d
	}
	conns, err := ingestConnectors(g, sources, root)
	if err != nil {
		return nil, err
	}
	return &scheduler.Ingest{Sources: sources, Connectors: conns, Root: root}, nil
}

// serveHTTP starts the daemon's HTTP server on addr and returns once it
// listens; stop shuts it down and returns its error.
func serveHTTP(ctx context.Context, s *scheduler.Scheduler, addr string) (stop func() error, err error) {
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, addr, func(net.Addr) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		return nil, err
	}
	return func() error {
		cancel()
		return <-errc
	}, nil
}

// printTick prints one line per source of the tick's ingest pass, then one
// per environment, of a --once tick.
func printTick(g *globals, res scheduler.TickResult) {
	if res.IngestErr != nil {
		fmt.Fprintf(g.env.Stdout, "ingest: failed: %v\n", res.IngestErr)
	}
	if res.Ingest != nil {
		printIngest(g, *res.Ingest, false)
	}
	for _, e := range res.Envs {
		switch {
		case e.Absent:
			fmt.Fprintf(g.env.Stdout, "%s: does not exist (or was invalidated); nothing to do\n", e.Env)
			continue
		case e.Err != nil:
			fmt.Fprintf(g.env.Stdout, "%s: failed: %v\n", e.Env, e.Err)
			continue
		}
		line := fmt.Sprintf("%s: generation %d, %d models due, %d ran, %d intervals", e.Env, e.Generation, len(e.Due), e.Ran, e.Intervals)
		if len(e.Deferred) > 0 {
			line += ", deferred (leased): " + strings.Join(e.Deferred, ", ")
		}
		if e.Lag > 0 {
			line += fmt.Sprintf(", lag %s", e.Lag)
		}
		fmt.Fprintln(g.env.Stdout, line)
	}
	if len(res.Envs) > 0 && !res.OpenedEngine {
		fmt.Fprintln(g.env.Stdout, "Nothing was due: the warehouse was not opened.")
	}
}
