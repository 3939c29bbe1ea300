package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/examples"
	"github.com/gapless-dev/gapless/internal/logkey"
)

func newInitCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a runnable example project into DIR (default: the working directory)",
		Long: `Writes the example project: a DuckDB warehouse and SQLite state (the
embedded default), a SEED CSV, an hourly INCREMENTAL_BY_TIME_RANGE model over
generated events, a daily rollup of it, a FULL model and a VIEW, and a
source, raw.orders (sources/orders.yaml), with a landing folder of three
CSV files (landing/orders) and an hourly model reading it.

It never overwrites: if any of its files exists already, it writes nothing
and names the file. Then, in DIR:

  gapless plan --auto-apply
  gapless ingest --once
  gapless run
  gapless status`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if !filepath.IsAbs(dir) {
				wd, err := g.env.Getwd()
				if err != nil {
					return fmt.Errorf("init: %w", err)
				}
				dir = filepath.Join(wd, dir)
			}
			n, err := writeProject(examples.Quickstart(), dir)
			if err != nil {
				return err
			}
			g.log.Debug("project written", logkey.Project, dir, logkey.Files, n)
			fmt.Fprintf(g.env.Stdout, "Wrote the example project to %s (%d files).\n\nNext:\n  cd %s\n  gapless plan --auto-apply\n  gapless ingest --once\n  gapless run\n  gapless status\n",
				dir, n, dir)
			return nil
		},
	}
}

// writeProject copies src into dir. It first checks that none of src's files
// exists in dir, so that it either writes everything or nothing.
func writeProject(src fs.FS, dir string) (int, error) {
	var files []string
	err := fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("init: reading the embedded example: %w", err)
	}
	for _, f := range files {
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if _, err := os.Lstat(dst); err == nil {
			return 0, fmt.Errorf("init: %s exists already; init never overwrites (choose an empty folder)", dst)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("init: %w", err)
		}
	}
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return 0, fmt.Errorf("init: reading the embedded %s: %w", f, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return 0, fmt.Errorf("init: %w", err)
		}
		// O_EXCL: a file that appeared since the check is still not overwritten.
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return 0, fmt.Errorf("init: %w", err)
		}
		_, werr := out.Write(b)
		cerr := out.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return 0, fmt.Errorf("init: writing %s: %w", dst, err)
		}
	}
	return len(files), nil
}
