package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/sqlparse"
)

// messyModels are model files written without care for layout: lower-case
// keywords, attributes on one line, comments everywhere, macros.
var messyModels = map[string]string{
	"models/messy_daily.sql": `-- Daily totals, written in a hurry.
model (name demo.messy_daily, KIND incremental_by_time_range (time_column day, batch_size 2), -- daily
  cron '@daily', grain (day),
  /* who to ask */ owner 'data-eng'
);

@DEF(factor, 2);

select date_trunc('day', event_ts) as day,   count(*) * @factor as events_x2,
  'a  b' as "Spaced  Name"   -- kept as written
from demo.events
where event_ts between @start_ts and @end_ts
group by all
`,
	"models/messy_full.sql": `MODEL (name demo.messy_full, kind FULL);
select customer_id ,segment from demo.customers where segment is not null  ;
`,
}

// fingerprints loads the project at dir and returns each model's
// fingerprint.
func fingerprints(t *testing.T, dir string) map[string]string {
	t.Helper()
	p, err := sqlparse.Open()
	require.NoError(t, err)
	defer p.Close()
	pr, _, err := project.Load(t.Context(), dir, p)
	require.NoError(t, err)
	out := map[string]string{}
	for name, s := range pr.Snapshots {
		out[name] = s.Fingerprint.String()
	}
	return out
}

// readModels returns the content of every file under dir/models.
func readModels(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	paths, err := filepath.Glob(filepath.Join(dir, "models", "*.sql"))
	require.NoError(t, err)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[filepath.Base(p)] = string(b)
	}
	return out
}

// Scenario: a SQLMesh user runs `gapless format` on the example project
// with two hand-written model files. --check names the files that would
// change, exits 1 and writes nothing. format rewrites them in the canonical
// layout (the header one attribute per line, keywords upper-cased), keeps
// comments, strings, quoted names and macros as written, and no model's
// fingerprint changes: nothing would be backfilled. A second format changes
// nothing and --check then exits 0.
func TestFormatRewritesAndKeepsFingerprints(t *testing.T) {
	t.Parallel()
	dir := initProjectWithSource(t)
	for rel, src := range messyModels {
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(src), 0o644))
	}
	before := fingerprints(t, dir)
	files := readModels(t, dir)

	r := run(t, dir, "format", "--check")
	require.Equal(t, ExitFailure, r.code, r.stderr)
	require.Contains(t, r.stdout, "would reformat models/messy_daily.sql")
	require.Contains(t, r.stdout, "would reformat models/messy_full.sql")
	require.Equal(t, files, readModels(t, dir), "--check writes nothing")

	out := mustRun(t, dir, "format")
	require.Contains(t, out, "formatted models/messy_daily.sql")
	require.Equal(t, before, fingerprints(t, dir), "formatting changes no fingerprint")

	after := readModels(t, dir)
	require.Equal(t, `-- Daily totals, written in a hurry.
MODEL (
  name demo.messy_daily,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column day,
    batch_size 2
  ), -- daily
  cron '@daily',
  grain (day),
  /* who to ask */
  owner 'data-eng'
);

@DEF(factor, 2);

SELECT date_trunc('day', event_ts) AS day, count(*) * @factor AS events_x2,
  'a  b' AS "Spaced  Name" -- kept as written
FROM demo.events
WHERE event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL
`, after["messy_daily.sql"])
	require.Equal(t, "MODEL (\n  name demo.messy_full,\n  kind FULL\n);\n\nSELECT customer_id, segment FROM demo.customers WHERE segment IS NOT NULL;\n",
		after["messy_full.sql"])
	for name, src := range after {
		require.True(t, strings.HasPrefix(src, "MODEL (\n") || strings.HasPrefix(src, "--"), name)
	}

	out = mustRun(t, dir, "format")
	require.Contains(t, out, "0 files formatted")
	require.Equal(t, after, readModels(t, dir), "formatting is idempotent")
	r = run(t, dir, "format", "--check")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
}

// Scenario: one model file does not parse. `gapless format` names it with
// its line and leaves it untouched, formats the others it is given, and
// exits 1.
func TestFormatNamesAFileThatDoesNotParse(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	bad := "MODEL (\n  name demo.bad,\n  kind FULL,\n  cron '61 * * * *'\n);\nSELECT 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "bad.sql"), []byte(bad), 0o644))
	messy := messyModels["models/messy_full.sql"]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "messy_full.sql"), []byte(messy), 0o644))

	r := run(t, dir, "format", "models/bad.sql", "models/messy_full.sql")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "models/bad.sql:4:")
	require.Contains(t, r.stderr, "1 file not formatted")
	after := readModels(t, dir)
	require.Equal(t, bad, after["bad.sql"], "left untouched")
	require.NotEqual(t, messy, after["messy_full.sql"], "the other file is formatted")

	r = run(t, dir, "format", "models/no_such.sql")
	require.Equal(t, ExitUsage, r.code, r.stderr)
}

// Scenario: SQLMesh's pretty-printer options, which would change a query's
// words, are refused as usage errors saying why; --no-rewrite-casts (gapless
// never rewrites casts) is accepted.
func TestFormatRefusesPrettyPrinterOptions(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	for _, args := range [][]string{{"--normalize"}, {"--leading-comma"}, {"--transpile", "postgres"}, {"--indent", "4"}} {
		r := run(t, dir, append([]string{"format", "--check"}, args...)...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, args[0])
	}
	r := run(t, dir, "format", "--no-rewrite-casts")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "files formatted")
}

// Scenario: replacing a file fails part way (the target is a folder, so
// the rename fails): the target is as it was and no temporary file is
// left behind.
func TestFormatReplaceFileLeavesNoHalfFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "m.sql")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "inside"), 0o755))
	require.Error(t, replaceFile(target, []byte("MODEL (name a.b);"), 0o644))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
	inside, err := os.ReadDir(target)
	require.NoError(t, err)
	require.Len(t, inside, 1)

	file := filepath.Join(dir, "ok.sql")
	require.NoError(t, os.WriteFile(file, []byte("old"), 0o600))
	require.NoError(t, replaceFile(file, []byte("new"), 0o640))
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())
}

// Scenario: every example and test project of the repository, formatted:
// no model's fingerprint changes (formatting never triggers a backfill),
// and formatting again changes nothing (--check exits 0).
func TestFormatKeepsEveryExampleProjectsFingerprints(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"../examples/quickstart", "testdata/pgproject", "testdata/trinoproject",
		"../multiproc/testdata/race", "../multiproc/testdata/slow", "../bench/sqlmesh/project"} {
		dir := filepath.Join(t.TempDir(), "proj")
		require.NoError(t, os.CopyFS(dir, os.DirFS(src)), src)
		before := fingerprints(t, dir)
		r := run(t, dir, "format")
		require.Equal(t, ExitOK, r.code, "%s: %s%s", src, r.stdout, r.stderr)
		require.NotContains(t, r.stderr, "warning", src)
		require.Equal(t, before, fingerprints(t, dir), src)
		r = run(t, dir, "format", "--check")
		require.Equal(t, ExitOK, r.code, "%s: %s%s", src, r.stdout, r.stderr)
	}
}
