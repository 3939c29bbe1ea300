package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/bot"
)

func newGitHubCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Pull-request checks and deploys without a server (GitHub Actions)",
		Args:  rangeArgs(0, 0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newGitHubRunCmd(g))
	return cmd
}

func newGitHubRunCmd(g *globals) *cobra.Command {
	var eventFile, eventName string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Act on one GitHub event, as gapless serve would, and exit",
		Long: `Reads one event as a GitHub Actions workflow receives it ($GITHUB_EVENT_NAME
and the JSON file at $GITHUB_EVENT_PATH) and does what gapless serve does
for its delivery: plans the pull request (its environment and the prod
preview), writes its check runs and summary comment, or deploys on
/deploy or a merge. It runs the same jobs in this process until none is
left, then exits: 0 when every job succeeded, 1 when one failed.

It authenticates with github.token (default ${GITHUB_TOKEN}) or the App
of github.app_id; the state store must be one every run shares
(PostgreSQL), since a workflow's files do not outlive it.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			if eventFile == "" {
				eventFile = os.Getenv("GITHUB_EVENT_PATH")
			}
			if eventName == "" {
				eventName = os.Getenv("GITHUB_EVENT_NAME")
			}
			if eventFile == "" || eventName == "" {
				return usagef("--event FILE and --event-name NAME are required (GitHub Actions sets $GITHUB_EVENT_PATH and $GITHUB_EVENT_NAME)")
			}
			file, err := g.path(eventFile)
			if err != nil {
				return err
			}
			payload, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("reading the event: %w", err)
			}
			cfg, err := g.openConfig()
			if err != nil {
				return err
			}
			gh, err := requireGitHub(cfg, "gapless github run")
			if err != nil {
				return err
			}
			host, err := bot.NewHost(gh, bot.HostParams{Log: g.log})
			if err != nil {
				return &UsageError{Err: err}
			}
			b, err := g.openBackend(ctx, cfg, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			res, err := bot.RunEvent(ctx, bot.RunParams{
				GitHub: gh, Store: b.Store, Engine: b.Engine, Host: host, Clock: g.clock(), Log: g.log,
				EventName: eventName, Payload: payload,
			})
			for _, j := range res.Jobs {
				fmt.Fprintf(g.env.Stdout, "%-20s %s (attempts: %d)\n", j.Kind, j.State, j.Attempt)
			}
			if err != nil {
				return fmt.Errorf("%s %s on %s: %w", res.Event.Kind, res.Event.Action, res.Event.Repo, err)
			}
			fmt.Fprintf(g.env.Stdout, "Done: %s %s on %s.\n", res.Event.Kind, res.Event.Action, res.Event.Repo)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&eventFile, "event", "", "the event's JSON file (default $GITHUB_EVENT_PATH)")
	f.StringVar(&eventName, "event-name", "", "the event's name: pull_request, issue_comment, push (default $GITHUB_EVENT_NAME)")
	return cmd
}
