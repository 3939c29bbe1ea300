package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/warehouse"
)

func newQueryCmd(g *globals) *cobra.Command {
	var asJSON, allowWrites, allowPhysical bool
	cmd := &cobra.Command{
		Use:   `query "SQL"`,
		Short: "Run a read query on the warehouse and print the rows",
		Long: `Runs one read query on the project's warehouse and prints the rows as a
table, or with --json as {"columns": [...], "types": [...], "rows": [[...],
...]}. DATE values print as dates (2024-01-02), timestamps in RFC 3339. prod's
models are views named schema.table; environment E's are schema__E.table.

A read is one SELECT (also WITH ... SELECT, VALUES, EXPLAIN; DuckDB's
DESCRIBE, SHOW, SUMMARIZE; PostgreSQL's SHOW, TABLE), run in a read-only
transaction. Anything else (INSERT, UPDATE, DELETE, CREATE, DROP, COPY,
ATTACH, SET, several statements, a write inside a CTE) is refused with exit
2 and changes nothing. --allow-writes runs any one statement; a statement
that names gapless's physical schemas (gapless__*) is refused even then
unless --allow-physical-writes is also given: rows changed there by hand are
served as they are and status does not see the change.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			sql := args[0]
			if allowPhysical && !allowWrites {
				return usagef("--allow-physical-writes needs --allow-writes")
			}
			if allowWrites && !allowPhysical && warehouse.NamesPhysicalSchema(sql) {
				return usagef("query --allow-writes: the statement names gapless's physical schemas (%s*), which hold the rows gapless serves; "+
					"a change there is served as it is, and status and plans do not see it. Nothing ran. "+
					"To write there anyway, add --allow-physical-writes; to recompute a model's rows, use gapless plan --restate-model", warehouse.PhysicalSchemaPrefix)
			}
			_, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			var res *warehouse.Result
			if allowWrites {
				if allowPhysical {
					g.log.WarnContext(ctx, "query --allow-physical-writes: writing into gapless's physical tables; status and plans do not see this change, and the rows are served as they are left")
				} else {
					g.log.WarnContext(ctx, "query --allow-writes: running the statement with write access; gapless does not record what it changes")
				}
				res, err = b.Engine.Query(ctx, sql)
			} else {
				res, err = b.Engine.ReadOnlyQuery(ctx, sql)
			}
			if errors.Is(err, warehouse.ErrNotARead) {
				return &UsageError{Err: fmt.Errorf("query: refused: %w\n  query runs reads only (SELECT, WITH ... SELECT, VALUES, EXPLAIN, DESCRIBE, SHOW): "+
					"nothing ran and nothing changed. To write, add --allow-writes", err)}
			}
			if err != nil {
				return fmt.Errorf("query: %w", err)
			}
			showDates(res)
			if asJSON {
				out := warehouse.Result{Columns: res.Columns, Types: res.Types, Rows: res.Rows}
				if out.Columns == nil {
					out.Columns = []string{}
				}
				if out.Rows == nil {
					out.Rows = [][]any{}
				}
				return writeJSON(g.env.Stdout, out)
			}
			return printResult(g.env.Stdout, res)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&allowWrites, "allow-writes", false, "run any one statement, not only a read (never into gapless__* schemas without --allow-physical-writes)")
	cmd.Flags().BoolVar(&allowPhysical, "allow-physical-writes", false, "with --allow-writes: allow a statement that names gapless's physical schemas (gapless__*)")
	return cmd
}

// printResult writes rows as an aligned table, then the row count.
func printResult(w io.Writer, res *warehouse.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(res.Columns, "\t"))
	for _, row := range res.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = cell(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing rows: %w", err)
	}
	fmt.Fprintf(w, "(%s)\n", plural(int64(len(res.Rows)), "row", "rows"))
	return nil
}

// showDates replaces the values of DATE columns (a time.Time at midnight,
// as engines return them) by the date they are, "2024-01-02", so that rows
// print and encode as dates, not as timestamps.
func showDates(res *warehouse.Result) {
	for i, typ := range res.Types {
		if typ != "DATE" {
			continue
		}
		for _, row := range res.Rows {
			if i >= len(row) {
				continue
			}
			if t, ok := row[i].(time.Time); ok {
				row[i] = t.UTC().Format(time.DateOnly)
			}
		}
	}
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return fmt.Sprintf("%x", x)
	}
	s := fmt.Sprint(v)
	return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
}
