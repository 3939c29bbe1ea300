package cli

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/config"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		listen         string
		workers        int
		maxBytes       int64
		grace, recEvry time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the GitHub App: plan every pull request, keep its checks, deploy on /deploy or merge",
		Long: `Serves the GitHub App configured in gapless.yaml's github block, in one
process: POST /webhook (GitHub's deliveries), the workers that plan pull
requests, keep their check runs and summary comment, and deploy them, and
GET /healthz and GET /metrics.

Every delivery must carry a valid X-Hub-Signature-256 for
github.webhook_secret (serve refuses to start without one); a delivery id
seen before does nothing. Work goes through a durable queue in the state
store's database (a file of its own beside a SQLite state store), so
several serve processes on one PostgreSQL state store share it.

Each pull request into the prod branch gets its own environment
(<pr_environment_name>_<number>, backfilled from pr_start), and three check
runs on its head: "gapless / pr environment", "gapless / prod plan
preview" and "gapless", the one branch protection should require: it is
green only for a verdict planned at the current head against prod's
current generation.

On SIGINT or SIGTERM it stops taking deliveries, lets running jobs finish
within --grace and cancels the rest (another process, or the next start,
runs them again).`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			cfg, err := g.openConfig()
			if err != nil {
				return err
			}
			if _, err := requireGitHub(cfg, "gapless serve"); err != nil {
				return err
			}
			if err := cfg.GitHub.Require("gapless serve", "webhook_secret", "repositories"); err != nil {
				return &UsageError{Err: err}
			}
			if !cfg.GitHub.UsesApp() && cfg.GitHub.Token.IsZero() {
				return &UsageError{Err: cfg.GitHub.Require("gapless serve", "app_id", "private_key_file")}
			}
			b, err := g.openBackend(ctx, cfg, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			srv, closeQ, err := bot.OpenServer(ctx, bot.ServerParams{
				GitHub: cfg.GitHub, StateConn: cfg.State, Store: b.Store, Engine: b.Engine,
				Clock: g.clock(), Log: g.log, Registry: reg, Workers: workers, MaxWebhookBytes: maxBytes,
			})
			if errors.Is(err, bot.ErrNoWebhookSecret) || errors.Is(err, bot.ErrGitHubSetup) {
				return &UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			defer closeQ()
			srv.Grace, srv.ReconcileEvery = grace, recEvry
			var lc net.ListenConfig
			l, err := lc.Listen(ctx, "tcp", listen)
			if err != nil {
				return fmt.Errorf("serve: listening on %s: %w", listen, err)
			}
			fmt.Fprintf(g.env.Stdout, "Serving the GitHub App for %v on %s (webhook: POST /webhook).\n", cfg.GitHub.Repositories, l.Addr())
			if err := srv.Run(ctx, l); err != nil {
				return err
			}
			fmt.Fprintln(g.env.Stdout, "Stopped.")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", ":8080", "address to serve on")
	f.IntVar(&workers, "workers", 4, "how many jobs run at once")
	f.Int64Var(&maxBytes, "webhook-max-bytes", bot.DefaultMaxWebhookBytes, "largest webhook body accepted (413 beyond)")
	f.DurationVar(&grace, "grace", 30*time.Second, "on SIGINT/SIGTERM, how long running jobs may take to finish before they are cancelled")
	f.DurationVar(&recEvry, "reconcile-every", 5*time.Minute, "how often open pull requests are compared with what gapless has planned")
	return cmd
}

// requireGitHub returns the project's github block, or a usage error.
func requireGitHub(cfg *config.Config, what string) (*config.GitHub, error) {
	if cfg.GitHub == nil {
		return nil, usagef("%s has no github: block; %s needs one (see the README, \"Pull requests\")", cfg.File, what)
	}
	return cfg.GitHub, nil
}
