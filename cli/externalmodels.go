package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse"
)

func newCreateExternalModelsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "create_external_models",
		Short: "Declare the tables the models read that nothing declares, with their columns read from the warehouse, in external_models.yaml",
		Long: `Finds every schema-qualified table the project's models read that is
neither a model, a source nor an external model already declared, reads its
columns from the warehouse, and writes them to external_models.yaml at the
project root, as SQLMesh's create_external_models does: the entries already
there are kept, and every entry is written sorted by name. A table the
warehouse does not have is named on stderr and left out.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := g.projectRoot()
			if err != nil {
				return err
			}
			file, added, missing, err := createExternalModels(cmd.Context(), root, g.backendOptions(false))
			if err != nil {
				return err
			}
			for _, t := range missing {
				g.say(fmt.Sprintf("%s: not in the warehouse; not declared", t), logkey.Table, t)
			}
			_, err = fmt.Fprintf(g.env.Stdout, "%s: %d external model(s) added\n", file, len(added))
			return err
		},
	}
}

// createExternalModels is create_external_models on the project at root:
// it loads the project collecting the undeclared tables, reads each one's
// columns from the warehouse, and merges them into external_models.yaml.
// It returns the file, the names added and the tables the warehouse does
// not have.
func createExternalModels(ctx context.Context, root string, opts backend.Options) (file string, added, missing []string, err error) {
	var undeclared []sqlparse.TableRef
	var p *sqlparse.Parser
	_, cfg, err := project.LoadWith(ctx, root, project.Options{Undeclared: &undeclared, Parser: func() (*sqlparse.Parser, error) {
		var err error
		p, err = sqlparse.Open()
		return p, err
	}})
	if p != nil {
		p.Close()
	}
	if err != nil {
		return "", nil, nil, err
	}
	eng, err := backend.OpenEngine(ctx, cfg.Warehouse, opts)
	if err != nil {
		return "", nil, nil, err
	}
	defer func() {
		if cerr := eng.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the warehouse: %w", cerr)
		}
	}()
	catalog := config.WarehouseCatalog(cfg.Warehouse)
	var add []config.ExternalModel
	for _, ref := range undeclared {
		t := warehouse.Table{Schema: ref.Schema, Name: ref.Name}
		ok, err := eng.TableExists(ctx, t)
		if err != nil {
			return "", nil, nil, fmt.Errorf("looking up %s: %w", t, err)
		}
		if !ok {
			missing = append(missing, t.String())
			continue
		}
		cols, err := eng.Columns(ctx, t)
		if err != nil {
			return "", nil, nil, fmt.Errorf("reading the columns of %s: %w", t, err)
		}
		em := config.ExternalModel{Name: config.QualifiedName(catalog, ref.Schema, ref.Name), Catalog: catalog, Schema: ref.Schema, Table: ref.Name}
		for _, c := range cols {
			em.Columns = append(em.Columns, config.ExternalColumn{Name: c.Name, Type: c.Type})
		}
		add = append(add, em)
		added = append(added, em.Name)
	}
	slices.Sort(added)
	file, err = config.WriteExternalModels(root, add)
	return file, added, missing, err
}
