package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/project"
)

// connCheck is one backend of `gapless info` and whether it answered.
type connCheck struct {
	URL   string `json:"url"`
	Kind  string `json:"kind"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// infoEnvironment is one environment of `gapless info`.
type infoEnvironment struct {
	Name       string `json:"name"`
	Models     int    `json:"models"`
	Generation int64  `json:"generation"`
}

// infoReport is `gapless info --json`; its field names are stable.
type infoReport struct {
	Project string         `json:"project"`
	Config  string         `json:"config"`
	Models  int            `json:"models"`
	Kinds   map[string]int `json:"kinds"`
	Sources []string       `json:"sources"`
	// Warehouse and State are the backends and whether each answered a
	// query (the warehouse: SELECT 1, read-only; the state store: listing
	// the environments).
	Warehouse connCheck `json:"warehouse"`
	State     connCheck `json:"state"`
	// Environments is nil when the state store did not answer.
	Environments []infoEnvironment `json:"environments"`
}

// ErrConnection is returned by info when a backend does not answer.
var ErrConnection = errors.New("connection failed")

func newInfoCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the project: models, sources, the warehouse and state store (and whether each answers), environments",
		Long: `Loads the project and prints how many models it has (by kind), its sources,
the warehouse and the state store it is configured with, each checked with a
read (the warehouse: SELECT 1; the state store: listing the environments),
and the environments the state store holds with how many models each
serves. Passwords in connection URLs are not shown. Exits 1 when a backend
does not answer, after printing everything else.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			pr, cfg, err := g.openProject(cmd.Context())
			if err != nil {
				return err
			}
			rep := g.projectInfo(cmd.Context(), pr, cfg)
			if asJSON {
				if err := writeJSON(g.env.Stdout, rep); err != nil {
					return err
				}
			} else {
				printInfo(g.env.Stdout, rep)
			}
			var failed []string
			for _, c := range []connCheck{rep.Warehouse, rep.State} {
				if !c.OK {
					failed = append(failed, c.Kind+" "+c.URL+": "+c.Error)
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("info: %w: %s", ErrConnection, strings.Join(failed, "; "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// projectInfo describes pr and checks the backends cfg names. A backend
// that does not open or answer is reported in its connCheck, never as an
// error, so that the rest is still shown.
func (g *globals) projectInfo(ctx context.Context, pr *project.Project, cfg *config.Config) *infoReport {
	rep := &infoReport{Project: pr.Dir, Kinds: map[string]int{}, Sources: slices.Sorted(maps.Keys(pr.Sources))}
	if cfg.Found {
		rep.Config = cfg.File
	}
	for _, m := range pr.Models {
		if m.Source {
			continue
		}
		rep.Models++
		rep.Kinds[string(m.Kind)]++
	}
	if rep.Sources == nil {
		rep.Sources = []string{}
	}
	rep.Warehouse = connCheck{URL: cfg.Warehouse.String(), Kind: "warehouse"}
	if e, err := g.openEngine(ctx, cfg); err != nil {
		rep.Warehouse.Error = err.Error()
	} else {
		if _, err := e.ReadOnlyQuery(ctx, "SELECT 1"); err != nil {
			rep.Warehouse.Error = err.Error()
		} else {
			rep.Warehouse.OK = true
		}
		if err := e.Close(); err != nil {
			rep.Warehouse.OK, rep.Warehouse.Error = false, "closing: "+err.Error()
		}
	}
	rep.State = connCheck{URL: cfg.State.String(), Kind: "state"}
	st, err := backend.OpenStore(ctx, cfg.State)
	if err != nil {
		rep.State.Error = err.Error()
		return rep
	}
	defer func() {
		if err := st.Close(); err != nil {
			rep.State.OK, rep.State.Error = false, "closing: "+err.Error()
		}
	}()
	envs, err := st.ListEnvironments(ctx)
	if err != nil {
		rep.State.Error = err.Error()
		return rep
	}
	rep.State.OK = true
	rep.Environments = []infoEnvironment{}
	for _, e := range envs {
		rep.Environments = append(rep.Environments, infoEnvironment{Name: e.Name, Models: len(e.Snapshots), Generation: e.Generation})
	}
	return rep
}

func printInfo(w io.Writer, rep *infoReport) {
	fmt.Fprintf(w, "Project: %s\n", rep.Project)
	if rep.Config != "" {
		fmt.Fprintf(w, "Config: %s\n", rep.Config)
	}
	kinds := make([]string, 0, len(rep.Kinds))
	for _, k := range slices.Sorted(maps.Keys(rep.Kinds)) {
		kinds = append(kinds, fmt.Sprintf("%d %s", rep.Kinds[k], k))
	}
	if len(kinds) > 0 {
		fmt.Fprintf(w, "Models: %d (%s)\n", rep.Models, strings.Join(kinds, ", "))
	} else {
		fmt.Fprintf(w, "Models: %d\n", rep.Models)
	}
	if len(rep.Sources) > 0 {
		fmt.Fprintf(w, "Sources: %d (%s)\n", len(rep.Sources), strings.Join(rep.Sources, ", "))
	} else {
		fmt.Fprintln(w, "Sources: 0")
	}
	for _, c := range []connCheck{rep.Warehouse, rep.State} {
		title := "Warehouse"
		if c.Kind == "state" {
			title = "State store"
		}
		if c.OK {
			fmt.Fprintf(w, "%s: %s: connection succeeded\n", title, c.URL)
		} else {
			fmt.Fprintf(w, "%s: %s: connection failed: %s\n", title, c.URL, firstLine(c.Error))
		}
	}
	switch {
	case rep.Environments == nil:
		fmt.Fprintln(w, "Environments: unknown (the state store did not answer)")
	case len(rep.Environments) == 0:
		fmt.Fprintln(w, "Environments: none yet (create prod with: gapless plan)")
	default:
		parts := make([]string, len(rep.Environments))
		for i, e := range rep.Environments {
			parts[i] = fmt.Sprintf("%s (%s)", e.Name, plural(int64(e.Models), "model", "models"))
		}
		fmt.Fprintf(w, "Environments: %d: %s\n", len(rep.Environments), strings.Join(parts, ", "))
	}
}
