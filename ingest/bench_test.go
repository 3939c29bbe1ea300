package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// BenchmarkIngestIdlePass is issue 14's idle target: a pass over 100 file
// sources with three files each, all applied, on SQLite state, under 50 ms
// and without opening the warehouse (OpenEngine fails the benchmark).
func BenchmarkIngestIdlePass(b *testing.B) {
	ctx := b.Context()
	root := b.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, st.Close()) })
	clk := clockwork.NewFakeClockAt(epoch)
	defs := map[string]*source.Definition{}
	var conns []connector.Connector
	for i := range 100 {
		dir := fmt.Sprintf("landing/s%03d", i)
		require.NoError(b, os.MkdirAll(filepath.Join(root, dir), 0o755))
		for f := range 3 {
			body := fmt.Sprintf("id,v\n%d,v\n", f)
			require.NoError(b, os.WriteFile(filepath.Join(root, dir, fmt.Sprintf("f%d.csv", f)), []byte(body), 0o644))
		}
		d := &source.Definition{Name: fmt.Sprintf("raw.s%03d", i), File: fmt.Sprintf("sources/s%03d.yaml", i),
			Connector: source.ConnectorFiles, Files: &source.Files{Path: dir + "/*.csv"}, Apply: source.ApplyAppend}
		c, err := files.New(d, files.Options{Root: root, Clock: clk})
		require.NoError(b, err)
		defs[d.Name], conns = d, append(conns, c)
	}
	wh, err := duckdb.Open(ctx, filepath.Join(b.TempDir(), "warehouse.duckdb"), duckdb.Options{})
	require.NoError(b, err)
	p := ingest.Params{Store: st, Engine: wh, Sources: defs, Connectors: conns, Root: root, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)}
	rep, err := ingest.Pass(ctx, p) // prime every source
	require.NoError(b, err)
	require.NoError(b, rep.Err())
	require.NoError(b, wh.Close())

	errOpened := errors.New("an idle pass opened the warehouse")
	p.Engine, p.OpenEngine = nil, func(context.Context) (warehouse.Ingester, error) { return nil, errOpened }
	b.ResetTimer()
	for b.Loop() {
		rep, err := ingest.Pass(ctx, p)
		if err != nil || rep.Err() != nil {
			b.Fatal(errors.Join(err, rep.Err()))
		}
		for _, s := range rep.Sources {
			if !s.Idle {
				b.Fatalf("source %s is not idle", s.Source)
			}
		}
	}
}
