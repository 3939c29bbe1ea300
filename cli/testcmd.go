package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/unittest"
)

func newTestCmd(g *globals) *cobra.Command {
	var patterns, selectModels []string
	cmd := &cobra.Command{
		Use:   "test [NAME | FILE | FILE::NAME ...]",
		Short: "Run the project's unit tests (tests/test*.yaml) on an in-memory DuckDB",
		Long: `Runs the unit tests in the project's tests/ folder (files test*.yaml and
test*.yml, in subfolders too), written as SQLMesh writes them: each names a
model, the rows of the tables it reads (inputs), the rows its query and its
CTEs must return (outputs), and its variables (vars: start, end,
execution_time). Each test runs on its own in-memory DuckDB: nothing is read
from or written to the project's warehouse.

A test that returns other rows fails with a diff: the rows that differ for
the same key (the model's grain) column by column, the expected rows that
are missing and the returned rows that were not expected. Rows are compared
in any order unless the query has ORDER BY; an expected value is read as
the type of the query's column.

NAME is a test name; FILE runs every test of a file; FILE::NAME one test of
it; a model file (models/x.sql) the tests of that model. -k runs the tests
whose name contains the substring, --select-model those of a model. Exit status 0 when
every test passes, 1 when one fails or cannot run, 2 for a usage error.`,
		Example: `  gapless test
  gapless test test_example_full_model
  gapless test tests/test_full_model.yaml::test_example_full_model
  gapless test -k full_model`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			pr, _, err := g.openProject(ctx)
			if err != nil {
				return err
			}
			now, err := g.execTime()
			if err != nil {
				return err
			}
			tests, err := g.selectTests(pr, args, patterns, selectModels)
			if err != nil {
				return err
			}
			rep := unittest.Run(ctx, pr, tests, unittest.Options{Now: now})
			if g.verbose > 0 {
				for _, res := range rep.Results {
					fmt.Fprintf(g.env.Stdout, "%s (%s:%d) ... %s\n", res.Test.Name, res.Test.File, res.Test.Line, res.Status)
				}
			}
			if err := rep.Write(g.env.Stdout); err != nil {
				return fmt.Errorf("test: writing the report: %w", err)
			}
			if !rep.OK() {
				return fmt.Errorf("test: %d of %d tests did not pass (failures=%d, errors=%d)",
					len(rep.Results)-rep.Count(unittest.Passed), len(rep.Results), rep.Count(unittest.Failed), rep.Count(unittest.Errored))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&patterns, "pattern", "k", nil, "run only the tests whose name contains this substring (repeatable)")
	cmd.Flags().StringArrayVar(&selectModels, "select-model", nil, "run only the tests of this model (a name or a glob such as demo.*; repeatable)")
	return cmd
}

// selectTests loads the project's tests and keeps those args, patterns and
// models name. An argument that names no test is a usage error.
func (g *globals) selectTests(pr *project.Project, args, patterns, models []string) ([]*unittest.Test, error) {
	dir := pr.Dir
	all, err := unittest.Load(dir)
	needAll := len(args) == 0
	for _, a := range args {
		if !strings.Contains(a, "::") && !isTestFile(a) && !strings.ContainsAny(a, "*?[") {
			needAll = true
		}
	}
	if err != nil && needAll {
		return nil, err
	}
	var out []*unittest.Test
	add := func(ts ...*unittest.Test) {
		for _, t := range ts {
			if !slices.ContainsFunc(out, func(o *unittest.Test) bool { return o.Name == t.Name && o.File == t.File }) {
				out = append(out, t)
			}
		}
	}
	if len(args) == 0 {
		add(all...)
	}
	for _, a := range args {
		file, name, hasName := strings.Cut(a, "::")
		switch {
		case strings.EqualFold(filepath.Ext(a), ".sql"):
			path, err := g.path(a)
			if err != nil {
				return nil, err
			}
			var model string
			for _, m := range pr.Models {
				if p := filepath.Join(dir, m.Path); p == path || m.Path == path {
					model = m.Name
				}
			}
			if model == "" {
				return nil, usagef("test: %s is not a model file of the project", a)
			}
			for _, t := range all {
				if t.Model == model {
					add(t)
				}
			}
		case hasName || isTestFile(a):
			path, err := g.path(file)
			if err != nil {
				return nil, err
			}
			ts, err := unittest.LoadFile(dir, path)
			if err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					return nil, usagef("test: %s: no such test file", file)
				}
				return nil, err
			}
			if !hasName {
				add(ts...)
				continue
			}
			i := slices.IndexFunc(ts, func(t *unittest.Test) bool { return t.Name == name })
			if i < 0 {
				return nil, usagef("test: %s has no test %s%s", file, name, didYouMean(name, testNames(ts)))
			}
			add(ts[i])
		case strings.ContainsAny(a, "*?["):
			n := len(out)
			for _, t := range all {
				rel, _ := filepath.Rel(dir, filepath.Join(dir, t.File))
				if ok, _ := filepath.Match(a, t.Name); ok {
					add(t)
				} else if ok, _ := filepath.Match(filepath.Clean(a), rel); ok {
					add(t)
				} else if ok, _ := filepath.Match(strings.TrimSuffix(filepath.Clean(a), ".yaml")+".yaml", rel); ok {
					add(t)
				}
			}
			if len(out) == n {
				return nil, usagef("test: %s matches no test", a)
			}
		default:
			i := slices.IndexFunc(all, func(t *unittest.Test) bool { return t.Name == a })
			if i < 0 {
				return nil, usagef("test: no test named %s in %s%s", a, filepath.Join(dir, unittest.TestsDir), didYouMean(a, testNames(all)))
			}
			add(all[i])
		}
	}
	if len(models) > 0 {
		out = slices.DeleteFunc(out, func(t *unittest.Test) bool {
			return !slices.ContainsFunc(models, func(m string) bool {
				ok, _ := filepath.Match(strings.ToLower(m), t.Model)
				return ok
			})
		})
	}
	if len(patterns) > 0 {
		out = slices.DeleteFunc(out, func(t *unittest.Test) bool {
			return !slices.ContainsFunc(patterns, func(p string) bool { return strings.Contains(t.Name, p) })
		})
	}
	return out, nil
}

func isTestFile(a string) bool {
	ext := strings.ToLower(filepath.Ext(a))
	return ext == ".yaml" || ext == ".yml"
}

func testNames(ts []*unittest.Test) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}
