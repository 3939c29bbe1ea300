package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/unittest"
)

// createTestArgs are create_test's arguments. --query and --var take two
// values each (TABLE SQL, NAME VALUE), as in SQLMesh, which cobra's flags
// cannot; the command reads its own arguments.
type createTestArgs struct {
	opts unittest.CreateOptions
	help bool
}

func newCreateTestCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   `create_test MODEL --query TABLE "SELECT ..." [--query TABLE "SELECT ..."] [--var NAME VALUE] [--path FILE] [--name NAME] [--overwrite] [--include-ctes]`,
		Short: "Write a unit test for a model from rows of the warehouse",
		Long: `Writes a unit test for MODEL as SQLMesh's create_test does. Each --query
TABLE SQL runs on the project's warehouse, read-only, and its rows become
the input rows of TABLE; the model then runs on those rows on an in-memory
DuckDB (nothing is written to the warehouse), and its rows become the
expected output. --var NAME VALUE sets a variable (start, end,
execution_time, ...). The test is written to --path (relative to tests/;
default tests/test_<model>.yaml) under --name (default test_<model>); a
file's other tests are kept. A test of that name already in the file is
replaced only with --overwrite. --include-ctes also writes the rows of every
CTE. The test is checked to pass before it is written.`,
		Example:            `  gapless create_test sqlmesh_example.incremental_model --query sqlmesh_example.seed_model "SELECT * FROM sqlmesh_example.seed_model WHERE event_date BETWEEN '2020-01-01' AND '2020-01-04' LIMIT 3" --var start 2020-01-01 --var end 2020-01-04`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, raw []string) (err error) {
			a, err := g.parseCreateTestArgs(raw)
			if err != nil {
				return err
			}
			if a.help {
				return cmd.Help()
			}
			if err := g.setupLogging(cmd); err != nil {
				return err
			}
			ctx := cmd.Context()
			pr, cfg, err := g.openProject(ctx)
			if err != nil {
				return err
			}
			if a.opts.Now, err = g.execTime(); err != nil {
				return err
			}
			e, err := g.openEngine(ctx, cfg)
			if err != nil {
				return err
			}
			defer func() {
				if cerr := e.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("closing the warehouse: %w", cerr)
				}
			}()
			path, err := unittest.Create(ctx, pr, e, a.opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "wrote test %s to %s\n", testName(a.opts), path)
			return nil
		},
	}
	return cmd
}

func testName(o unittest.CreateOptions) string {
	if o.Name != "" {
		return o.Name
	}
	return "test_" + o.Model[strings.LastIndexByte(o.Model, '.')+1:]
}

// parseCreateTestArgs reads create_test's arguments and the global flags
// (-p, --execution-time, --log-format, --log-level, -v, --lock-wait).
func (g *globals) parseCreateTestArgs(raw []string) (createTestArgs, error) {
	var a createTestArgs
	var models []string
	for i := 0; i < len(raw); i++ {
		arg := raw[i]
		name, inline, hasInline := strings.Cut(arg, "=")
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			models = append(models, arg)
			continue
		}
		if !strings.HasPrefix(arg, "--") || !hasInline {
			name, inline, hasInline = arg, "", false
		}
		value := func() (string, error) {
			if hasInline {
				return inline, nil
			}
			if i+1 >= len(raw) {
				return "", usagef("create_test: %s needs a value", name)
			}
			i++
			return raw[i], nil
		}
		two := func() (string, string, error) {
			if hasInline || i+2 >= len(raw) {
				return "", "", usagef("create_test: %s takes two values (%s A B)", name, name)
			}
			i += 2
			return raw[i-1], raw[i], nil
		}
		var err error
		switch name {
		case "-h", "--help":
			a.help = true
		case "--query", "-q":
			var q unittest.InputQuery
			q.Table, q.SQL, err = two()
			a.opts.Queries = append(a.opts.Queries, q)
		case "--var":
			var k, v string
			k, v, err = two()
			a.opts.Vars = append(a.opts.Vars, unittest.Var{Name: strings.ToLower(k), Value: v})
		case "-v":
			// SQLMesh's -v NAME VALUE, or gapless's -v (verbose).
			if i+2 < len(raw) && !strings.HasPrefix(raw[i+1], "-") && !strings.HasPrefix(raw[i+2], "-") {
				var k, v string
				k, v, err = two()
				a.opts.Vars = append(a.opts.Vars, unittest.Var{Name: strings.ToLower(k), Value: v})
			} else {
				g.verbose++
			}
		case "--path":
			a.opts.Path, err = value()
		case "--name", "-n":
			a.opts.Name, err = value()
		case "--overwrite", "-o":
			a.opts.Overwrite = true
		case "--include-ctes":
			a.opts.IncludeCTEs = true
		case "-p", "--project":
			// -p is the project folder, as for every gapless command; a
			// YAML file there is SQLMesh's -p (--path).
			var v string
			if v, err = value(); err == nil {
				if name == "-p" && isTestFile(v) {
					a.opts.Path = v
				} else {
					g.projectDir = v
				}
			}
		case "--execution-time":
			g.executionTime, err = value()
		case "--log-format":
			g.logFormat, err = value()
		case "--log-level":
			g.logLevel, err = value()
		case "-vv":
			g.verbose += 2
		case "--lock-wait":
			var s string
			if s, err = value(); err == nil {
				if g.lockWait, err = time.ParseDuration(s); err != nil {
					err = usagef("--lock-wait: %v", err)
				}
			}
		default:
			return a, usagef("create_test: unknown flag %s (flags: --query TABLE SQL, --var NAME VALUE, --path, --name, --overwrite, --include-ctes)", arg)
		}
		if err != nil {
			return a, err
		}
	}
	if a.help {
		return a, nil
	}
	if len(models) != 1 {
		return a, usagef("create_test takes one MODEL, got %d argument(s): %s", len(models), strings.Join(models, " "))
	}
	a.opts.Model = models[0]
	if len(a.opts.Queries) == 0 {
		return a, usagef("create_test: give the input rows with --query TABLE \"SELECT ...\" for each table %s reads", a.opts.Model)
	}
	return a, nil
}
