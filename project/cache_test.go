package project

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

// cachedProject is a project of three models in a chain, each reading the
// one before.
func cachedProject(t *testing.T) string {
	t.Helper()
	return writeProject(t, map[string]string{
		"gapless.yaml":   "model_defaults:\n  start: '2024-01-01'\n",
		"models/raw.sql": external,
		"models/stg.sql": "MODEL (name stg.events, kind FULL);\nSELECT id, amount FROM raw.events WHERE amount > 0",
		"models/agg.sql": "MODEL (name mart.totals, kind FULL);\nSELECT id, sum(amount) AS total FROM stg.events GROUP BY id",
	})
}

// countingParser returns a parser function for Options that hands out the
// shared test parser and counts how often it is asked for, and the counter.
func countingParser() (func() (*sqlparse.Parser, error), *atomic.Int64) {
	var n atomic.Int64
	return func() (*sqlparse.Parser, error) {
		n.Add(1)
		return parser, nil
	}, &n
}

// noParser is a parser function that fails: a load that uses it must be
// answered by the cache alone.
func noParser() (*sqlparse.Parser, error) { return nil, errors.New("the parser must not be needed") }

// loadCached loads dir through its parse cache and returns the project and
// what the cache did.
func loadCached(t *testing.T, dir string, p func() (*sqlparse.Parser, error)) (*Project, CacheStats, error) {
	t.Helper()
	c := OpenQueryCache(dir)
	require.NotNil(t, c, "a test binary knows its own build")
	pr, _, err := LoadWith(context.Background(), dir, Options{Parser: p, Cache: c})
	return pr, c.Stats(), err
}

// fingerprints maps each model of pr to its snapshot's fingerprint.
func fingerprints(pr *Project) map[string]string {
	out := map[string]string{}
	for name, s := range pr.Snapshots {
		out[name] = s.Fingerprint.String()
	}
	return out
}

// Scenario: a project is loaded twice through its parse cache. The first
// load parses both queries and writes the cache; the second is answered by
// the cache alone (the parser is never started) and yields exactly the
// project a plain load does: the same graph, versions and fingerprints.
func TestQueryCacheAnswersTheNextLoadWithoutTheParser(t *testing.T) {
	t.Parallel()
	dir := cachedProject(t)
	fresh, _, err := Load(context.Background(), dir, parser)
	require.NoError(t, err)

	open, opened := countingParser()
	first, st, err := loadCached(t, dir, open)
	require.NoError(t, err)
	require.Equal(t, CacheStats{Misses: 2, Saved: true}, st)
	require.EqualValues(t, 1, opened.Load(), "the parser is started once, however many queries miss")
	require.FileExists(t, filepath.Join(dir, CacheDir, queryCacheFile))

	second, st, err := loadCached(t, dir, noParser)
	require.NoError(t, err)
	require.Equal(t, CacheStats{Hits: 2}, st, "nothing changed: nothing parsed, nothing written")
	for _, pr := range []*Project{first, second} {
		require.Equal(t, fingerprints(fresh), fingerprints(pr))
		require.Equal(t, fresh.Graph.Order(), pr.Graph.Order())
		require.Equal(t, fresh.Queries, pr.Queries)
		for name, s := range fresh.Snapshots {
			require.Equal(t, s.Refs, pr.Snapshots[name].Refs, "%s: a cached load keeps the same table references", name)
		}
	}
}

// Scenario: one model's query changes between two loads; only that query is
// parsed again, and its new version is what a plain load computes.
// Changing the header alone (the cron) parses nothing: the cache is keyed
// by the query text.
func TestQueryCacheParsesOnlyTheChangedQuery(t *testing.T) {
	t.Parallel()
	dir := cachedProject(t)
	_, _, err := loadCached(t, dir, func() (*sqlparse.Parser, error) { return parser, nil })
	require.NoError(t, err)

	stg := filepath.Join(dir, "models", "stg.sql")
	require.NoError(t, os.WriteFile(stg, []byte("MODEL (name stg.events, kind FULL, cron '@hourly');\nSELECT id, amount FROM raw.events WHERE amount > 0"), 0o644))
	_, st, err := loadCached(t, dir, noParser)
	require.NoError(t, err)
	require.Equal(t, 2, st.Hits)

	require.NoError(t, os.WriteFile(stg, []byte("MODEL (name stg.events, kind FULL);\nSELECT id, amount FROM raw.events WHERE amount > 10"), 0o644))
	open, _ := countingParser()
	got, st, err := loadCached(t, dir, open)
	require.NoError(t, err)
	require.Equal(t, CacheStats{Hits: 1, Misses: 1, Saved: true}, st)
	fresh, _, err := Load(context.Background(), dir, parser)
	require.NoError(t, err)
	require.Equal(t, fingerprints(fresh), fingerprints(got))
}

// Scenario: the cache file is damaged in every way a crash, a disk or
// another build can damage it. Each time the load ignores the file (saying
// why), parses every query, returns the right project and rewrites the
// file, which the next load then uses.
func TestQueryCacheIgnoresADamagedOrStaleFileAndRewritesIt(t *testing.T) {
	t.Parallel()
	dir := cachedProject(t)
	path := filepath.Join(dir, CacheDir, queryCacheFile)
	fresh, _, err := Load(context.Background(), dir, parser)
	require.NoError(t, err)
	_, _, err = loadCached(t, dir, func() (*sqlparse.Parser, error) { return parser, nil })
	require.NoError(t, err)
	good, err := os.ReadFile(path)
	require.NoError(t, err)

	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-3] ^= 0xff
	otherBuild := openQueryCache(path+".other", "another build")
	otherBuild.used = openQueryCache(path, mustIdentity(t)).stored
	otherBuild.rewrite = true
	otherBuild.save()
	require.NoError(t, otherBuild.Stats().SaveErr)
	stale, err := os.ReadFile(path + ".other")
	require.NoError(t, err)

	for name, content := range map[string][]byte{
		"garbage":      []byte("not a cache at all"),
		"empty":        {},
		"truncated":    good[:len(good)/2],
		"flipped byte": flipped,
		"other build":  stale,
	} {
		require.NoError(t, os.WriteFile(path, content, 0o644), name)
		pr, st, err := loadCached(t, dir, func() (*sqlparse.Parser, error) { return parser, nil })
		require.NoError(t, err, name)
		require.Error(t, st.Ignored, name)
		require.Equal(t, 2, st.Misses, name)
		require.True(t, st.Saved, name)
		require.Equal(t, fingerprints(fresh), fingerprints(pr), name)
		_, st, err = loadCached(t, dir, noParser)
		require.NoError(t, err, name)
		require.Equal(t, CacheStats{Hits: 2}, st, "%s: the rewritten file is used", name)
	}
}

// Scenario: a cache file with a valid checksum holds an entry that cannot
// have come from its text (no canonical form, an offset past its end). The
// entry is not used: its query is parsed again and the file rewritten.
func TestQueryCacheRefusesAnEntryThatDoesNotFitItsText(t *testing.T) {
	t.Parallel()
	dir := cachedProject(t)
	_, _, err := loadCached(t, dir, func() (*sqlparse.Parser, error) { return parser, nil })
	require.NoError(t, err)
	path := filepath.Join(dir, CacheDir, queryCacheFile)
	for name, spoil := range map[string]func(*Query){
		"no canonical form":   func(q *Query) { q.Canonical = "" },
		"offset past the end": func(q *Query) { q.Tables[0].Offset = 1 << 20 },
		"nameless table":      func(q *Query) { q.Tables[0].Name = "" },
	} {
		c := openQueryCache(path, mustIdentity(t))
		require.Len(t, c.stored, 2)
		for k, q := range c.stored {
			q.Tables = append([]sqlparse.TableRef(nil), q.Tables...)
			spoil(&q)
			c.used[k] = q
		}
		c.rewrite = true
		c.save()
		require.NoError(t, c.Stats().SaveErr)

		_, st, err := loadCached(t, dir, func() (*sqlparse.Parser, error) { return parser, nil })
		require.NoError(t, err, name)
		require.Equal(t, CacheStats{Misses: 2, Saved: true}, st, name)
		_, st, err = loadCached(t, dir, noParser)
		require.NoError(t, err, name)
		require.Equal(t, 2, st.Hits, name)
	}
}

// Scenario: a query with a syntax error is not cached: every load reports
// it, at its file, line and column, until it is fixed.
func TestQueryCacheNeverRemembersAFailure(t *testing.T) {
	t.Parallel()
	dir := cachedProject(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "bad.sql"), []byte("MODEL (name stg.bad, kind FULL);\nSELECT FROM WHERE"), 0o644))
	open, opened := countingParser()
	_, st, err := loadCached(t, dir, open)
	require.ErrorContains(t, err, "models/bad.sql:2:")
	require.Equal(t, CacheStats{Misses: 3, Saved: true}, st, "a failed load still saves what parsed")
	_, st, err = loadCached(t, dir, open)
	require.ErrorContains(t, err, "models/bad.sql:2:")
	require.Equal(t, CacheStats{Hits: 2, Misses: 1, Saved: true}, st, "the bad query is parsed again")
	require.EqualValues(t, 2, opened.Load())
}

// Scenario: many processes load two versions of a project at once, each
// writing the cache, while others read it. The file is never torn: every
// writer renames a complete file over it, so every reader finds a whole
// file, and afterwards it decodes, no temporary file is left behind, and a
// load finds in it either every query or all but the one that differs
// between the versions.
func TestQueryCacheSurvivesConcurrentWriters(t *testing.T) {
	t.Parallel()
	dirA := cachedProject(t)
	_, _, err := loadCached(t, dirA, func() (*sqlparse.Parser, error) { return parser, nil })
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 16 {
		wg.Go(func() {
			if st := OpenQueryCache(dirA).Stats(); st.Ignored != nil {
				errs <- fmt.Errorf("reader %d: %w", i, st.Ignored)
			}
		})
		wg.Go(func() {
			// Half the writers parse stg as the project has it, half as
			// version B has it (amount > 5), as a load of each would.
			c := OpenQueryCache(dirA)
			ld := &loader{dir: dirA, cache: c, parser: func() (*sqlparse.Parser, error) { return parser, nil }}
			src := "SELECT id, amount FROM raw.events WHERE amount > 0"
			if i%2 == 1 {
				src = "SELECT id, amount FROM raw.events WHERE amount > 5"
			}
			if _, err := ld.parse(context.Background(), src); err != nil {
				errs <- err
				return
			}
			if _, err := ld.parse(context.Background(), "SELECT id, sum(amount) AS total FROM stg.events GROUP BY id"); err != nil {
				errs <- err
				return
			}
			c.save()
			if err := c.Stats().SaveErr; err != nil {
				errs <- fmt.Errorf("writer %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	entries, err := os.ReadDir(filepath.Join(dirA, CacheDir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the cache file is left: %v", entries)
	_, st, err := loadCached(t, dirA, func() (*sqlparse.Parser, error) { return parser, nil })
	require.NoError(t, err)
	require.NoError(t, st.Ignored, "the file is whole")
	require.GreaterOrEqual(t, st.Hits, 1)
	require.LessOrEqual(t, st.Misses, 1)
}

func mustIdentity(t *testing.T) string {
	t.Helper()
	id, err := buildIdentity()
	require.NoError(t, err)
	return id
}
