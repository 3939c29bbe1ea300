package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
)

// formatFlags are the flags of `gapless format`.
type formatFlags struct {
	check         bool
	appendNewline bool
}

func newFormatCmd(g *globals) *cobra.Command {
	var f formatFlags
	cmd := &cobra.Command{
		Use:   "format [MODEL_FILE...]",
		Short: "Rewrite model files in the canonical layout (all of models/ by default)",
		Long: `Rewrites model files in gapless's canonical layout, as sqlmesh format does:
the MODEL (...) header one attribute per line, two-space indent, lower-case
attribute names, the kind's properties and the columns one per line, and a
trailing ';'; in the query, whitespace normalised and reserved keywords in
upper case. Comments, strings, quoted identifiers and macros are kept as
written; statements before and after the query are kept as written.

Formatting never changes what a model computes: every formatted file is
loaded with the project and must keep its model's fingerprint, so no plan
sees a change and nothing is backfilled. A file whose query would change
its fingerprint is formatted with whitespace changes only (a query with
macro calls always is); one that still would is left as it is, with a
warning.

--check writes nothing: it lists the files that would change and exits 1
when there are any. A file that does not parse is named with its line and
left untouched (exit 1). Files are replaced whole (a temporary file, then a
rename): a failure never leaves half a file.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range prettyPrinterFlags {
				if cmd.Flags().Changed(name) {
					return usagef("--%s: gapless format does not pretty-print queries (sqlmesh format's --%s needs sqlglot's rewrite of the query, "+
						"which could change what a model computes and its fingerprint); it lays out the header and the query's whitespace and keywords only", name, name)
				}
			}
			return g.runFormat(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.check, "check", false, "write nothing; list the files that would change and exit 1 if any would")
	fl.BoolVar(&f.appendNewline, "append-newline", false, "end each file with a newline")
	fl.Bool("no-rewrite-casts", false, "keep casts as written (gapless never rewrites them)")
	// sqlmesh format's pretty-printer options: refused with the reason.
	fl.String("transpile", "", "not supported: see --help")
	fl.Bool("normalize", false, "not supported: see --help")
	fl.String("normalize-functions", "", "not supported: see --help")
	fl.Bool("leading-comma", false, "not supported: see --help")
	fl.Int("indent", 0, "not supported: see --help")
	fl.Int("pad", 0, "not supported: see --help")
	fl.Int("max-text-width", 0, "not supported: see --help")
	for _, name := range prettyPrinterFlags {
		_ = fl.MarkHidden(name)
	}
	return cmd
}

// prettyPrinterFlags are sqlmesh format's options that rewrite a query
// through sqlglot, which gapless does not have: they are refused, with the
// reason, rather than unknown.
var prettyPrinterFlags = []string{"transpile", "normalize", "normalize-functions", "leading-comma", "indent", "pad", "max-text-width"}

// formatted is one model file and its canonical form.
type formatted struct {
	path, rel string
	src, out  []byte
	mode      fs.FileMode
}

func (g *globals) runFormat(ctx context.Context, args []string, f formatFlags) error {
	root, err := g.projectRoot()
	if err != nil {
		return err
	}
	cfg, err := config.Load(root)
	if err != nil {
		return err
	}
	files, err := g.formatTargets(root, args)
	if err != nil {
		return err
	}
	opts := model.FormatOptions{Defaults: cfg.ModelDefaults, AppendNewline: f.appendNewline}
	var failed []string
	var changed []*formatted
	for _, path := range files {
		ff, err := formatOne(root, path, opts)
		if err != nil {
			fmt.Fprintf(g.env.Stderr, "%v\n", err)
			failed = append(failed, path)
			continue
		}
		if ff != nil {
			changed = append(changed, ff)
		}
	}
	if len(changed) > 0 {
		if changed, err = g.keepFingerprints(ctx, root, changed, opts); err != nil {
			return err
		}
	}
	out := g.env.Stdout
	if f.check {
		for _, ff := range changed {
			fmt.Fprintf(out, "would reformat %s\n", ff.rel)
		}
		if len(changed) > 0 || len(failed) > 0 {
			return fmt.Errorf("%s would be reformatted, %s could not be read",
				plural(int64(len(changed)), "file", "files"), plural(int64(len(failed)), "file", "files"))
		}
		fmt.Fprintf(out, "%s already formatted\n", plural(int64(len(files)), "file", "files"))
		return nil
	}
	for _, ff := range changed {
		if err := replaceFile(ff.path, ff.out, ff.mode); err != nil {
			return fmt.Errorf("formatting %s: %w", ff.rel, err)
		}
		fmt.Fprintf(out, "formatted %s\n", ff.rel)
	}
	fmt.Fprintf(out, "%s formatted, %s unchanged\n", plural(int64(len(changed)), "file", "files"),
		plural(int64(len(files)-len(changed)-len(failed)), "file", "files"))
	if len(failed) > 0 {
		return fmt.Errorf("%s not formatted (see above)", plural(int64(len(failed)), "file", "files"))
	}
	return nil
}

// formatTargets are the files named on the command line, or every model
// file under the project's models/ folder.
func (g *globals) formatTargets(root string, args []string) ([]string, error) {
	if len(args) > 0 {
		var out []string
		for _, a := range args {
			p, err := g.path(a)
			if err != nil {
				return nil, err
			}
			if st, err := os.Stat(p); err != nil {
				return nil, usagef("%s: %w", a, err)
			} else if st.IsDir() {
				return nil, usagef("%s is a folder; name model files", a)
			}
			out = append(out, p)
		}
		return out, nil
	}
	var out []string
	dir := filepath.Join(root, project.ModelsDir)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(path), ".sql") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing model files in %s: %w", dir, err)
	}
	slices.Sort(out)
	return out, nil
}

// formatOne formats one file; nil when it is already formatted.
func formatOne(root, path string, opts model.FormatOptions) (*formatted, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading model file: %w", err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading model file: %w", err)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		rel = path
	}
	out, err := model.Format(rel, src, opts)
	if err != nil {
		return nil, err
	}
	if string(out) == string(src) {
		return nil, nil
	}
	return &formatted{path: path, rel: rel, src: src, out: out, mode: st.Mode().Perm()}, nil
}

// keepFingerprints loads the project as it is and as formatted (in a
// mirror folder) and returns the files whose models keep their own
// fingerprints. A file that changes one is formatted again with whitespace
// changes only in its query, and dropped (with a warning) if that changes
// it too. When the project does not load as it is, the fingerprints cannot
// be compared and Format's own check (same model, equivalent query)
// stands alone: said in a warning.
func (g *globals) keepFingerprints(ctx context.Context, root string, changed []*formatted, opts model.FormatOptions) ([]*formatted, error) {
	parser, err := sqlparse.Open()
	if err != nil {
		return nil, fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer parser.Close()
	before, _, err := project.Load(ctx, root, parser)
	if err != nil {
		fmt.Fprintf(g.env.Stderr, "warning: the project does not load, so fingerprints are not compared: %v\n", err)
		return changed, nil
	}
	// Round 0 checks the full format; a file that changes a fingerprint is
	// formatted again with whitespace changes only, and round 1 checks it.
	for round := 0; round < 2; round++ {
		after, err := loadMirror(ctx, root, parser, changed)
		if err != nil {
			return nil, fmt.Errorf("loading the formatted project: %w", err)
		}
		bad := map[string]bool{}
		for name, s := range before.Snapshots {
			if a, ok := after.Snapshots[name]; !ok || ownHash(a) != ownHash(s) {
				bad[filepath.Clean(s.Model.Path)] = true
			}
		}
		var keep []*formatted
		retried := false
		for _, ff := range changed {
			if !bad[filepath.Clean(ff.rel)] {
				keep = append(keep, ff)
				continue
			}
			g.log.Debug("format changes a fingerprint", logkey.Path, ff.rel)
			if round == 0 {
				o := opts
				o.WhitespaceOnly = true
				if out, err := model.Format(ff.rel, ff.src, o); err == nil && string(out) != string(ff.src) {
					ff.out = out
					keep = append(keep, ff)
					retried = true
					continue
				}
			}
			fmt.Fprintf(g.env.Stderr, "warning: %s left as it is: formatting it would change its model's fingerprint\n", ff.rel)
		}
		changed = keep
		if !retried {
			break
		}
	}
	return changed, nil
}

// ownHash is a snapshot's own data and metadata hash (not its parents'): a
// change in one file shows in its own models only.
func ownHash(s *snapshot.Snapshot) string {
	return s.Fingerprint.DataHash + "/" + s.Fingerprint.MetadataHash
}

// loadMirror loads the project at root with changed's files formatted: a
// temporary folder mirrors the project's folders, with the formatted files
// written in it and links to every other file.
func loadMirror(ctx context.Context, root string, parser *sqlparse.Parser, changed []*formatted) (*project.Project, error) {
	mirror, err := os.MkdirTemp("", "gapless-format-*")
	if err != nil {
		return nil, fmt.Errorf("creating a folder to check the formatted files in: %w", err)
	}
	defer func() { _ = os.RemoveAll(mirror) }()
	byRel := map[string][]byte{}
	for _, ff := range changed {
		byRel[filepath.Clean(ff.rel)] = ff.out
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		dst := filepath.Join(mirror, rel)
		switch data, ok := byRel[rel]; {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case ok:
			return os.WriteFile(dst, data, 0o600)
		default:
			return os.Symlink(path, dst)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("mirroring the project: %w", err)
	}
	pr, _, err := project.Load(ctx, mirror, parser)
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// replaceFile writes data to path whole: a temporary file in the same
// folder, synced, then renamed over path. A failure leaves path as it was.
func replaceFile(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("creating a temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing the file: %w", err)
	}
	return nil
}
