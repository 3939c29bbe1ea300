package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/warehouse"
)

var _ warehouse.Ingester = (*Engine)(nil)

var (
	fencesTable  = quoteTable(warehouse.Table{Schema: warehouse.IngestSchema, Name: "fences"})
	markersTable = quoteTable(warehouse.Table{Schema: warehouse.IngestSchema, Name: "markers"})
)

// ingestDDL creates the fence and marker tables (see warehouse.Ingester).
var ingestDDL = []string{
	"CREATE SCHEMA IF NOT EXISTS " + quoteIdent(warehouse.IngestSchema),
	"CREATE TABLE IF NOT EXISTS " + fencesTable + ` (source text PRIMARY KEY,
  planned_generation bigint NOT NULL, serving_generation bigint NOT NULL, updated_at timestamptz NOT NULL)`,
	"CREATE TABLE IF NOT EXISTS " + markersTable + ` (source text NOT NULL, generation bigint NOT NULL,
  kind text NOT NULL, idx bigint NOT NULL, "rows" bigint NOT NULL, applied_at timestamptz NOT NULL,
  PRIMARY KEY (source, generation, kind, idx))`,
}

// ingestReady remembers, per engine, that the fence and marker tables
// exist, and holds the in-memory DuckDB that decodes staged files.
type ingestReady struct {
	mu    sync.Mutex
	ready bool

	duckMu sync.Mutex
	// duck is opened by the first step that reads staged files and closed
	// with the engine: opening a DuckDB instance costs milliseconds, about
	// as much as a small batch's whole transaction (BenchmarkIngestBatch).
	// It only ever runs read_parquet/read_csv/read_json queries, which
	// leave nothing behind in it.
	duck   *sql.DB
	closed bool
}

// stagedReader returns the engine's in-memory DuckDB (see ingestReady).
func (e *Engine) stagedReader() (*sql.DB, error) {
	r := &e.ingest
	r.duckMu.Lock()
	defer r.duckMu.Unlock()
	if r.closed {
		return nil, errors.New("the engine is closed")
	}
	if r.duck == nil {
		connector, err := duckdb.NewConnector("", nil)
		if err != nil {
			return nil, fmt.Errorf("opening the in-memory DuckDB that reads staged files: %w", err)
		}
		r.duck = sql.OpenDB(connector)
	}
	return r.duck, nil
}

// closeStagedReader closes the engine's in-memory DuckDB, if it opened
// one; later steps that read staged files fail.
func (e *Engine) closeStagedReader() error {
	r := &e.ingest
	r.duckMu.Lock()
	defer r.duckMu.Unlock()
	r.closed = true
	if r.duck == nil {
		return nil
	}
	err := r.duck.Close()
	r.duck = nil
	return err
}

// ensureIngest creates the fence and marker tables once per engine, under
// an advisory lock on the schema's name: racing CREATE … IF NOT EXISTS
// statements can otherwise fail on PostgreSQL's catalog.
func (e *Engine) ensureIngest(ctx context.Context) error {
	r := &e.ingest
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready {
		return nil
	}
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockName(ctx, tx, warehouse.Table{Schema: warehouse.IngestSchema, Name: "markers"}); err != nil {
			return err
		}
		for _, ddl := range ingestDDL {
			if _, err := exec(ctx, tx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	r.ready = err == nil
	return err
}

// ApplyIngest runs one ingestion step (see warehouse.Ingester) in one
// transaction. Every step but a first fence updates the source's row of
// the fences table, so the steps of one source take turns on its row lock
// and each statement after it sees what the step before committed. A
// second applier of one step blocks on the first's marker insert and,
// once it commits, inserts nothing: warehouse.ErrAlreadyApplied.
//
// Staged files are decoded by an embedded in-memory DuckDB and streamed in
// with COPY inside the transaction; columns are matched by name.
func (e *Engine) ApplyIngest(ctx context.Context, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	const op = "apply ingest"
	object := p.Describe()
	if err := e.checkIngest(p); err != nil {
		return warehouse.IngestResult{}, fail(op, object, "", err)
	}
	if err := e.ensureIngest(ctx); err != nil {
		return warehouse.IngestResult{}, failStep(op, object, err)
	}
	var duck *sql.DB
	if p.Step == warehouse.StepChunk || p.Step == warehouse.StepBatch {
		var err error
		if duck, err = e.stagedReader(); err != nil {
			return warehouse.IngestResult{}, failStep(op, object, err)
		}
	}
	var res warehouse.IngestResult
	err := e.inTx(ctx, func(tx pgx.Tx) (err error) {
		res, err = pgIngestStep(ctx, tx, p, duck)
		return err
	})
	if err != nil {
		return warehouse.IngestResult{}, failStep(op, object, err)
	}
	return res, nil
}

func (e *Engine) checkIngest(p warehouse.IngestParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if containsNUL(p.Source) {
		return fmt.Errorf("%w: source name %q contains a NUL byte", warehouse.ErrInvalidArgument, p.Source)
	}
	switch p.Step {
	case warehouse.StepChunk, warehouse.StepBatch:
		if err := e.checkQualified(p.Table); err != nil {
			return err
		}
		if p.TimeColumn != "" {
			if err := e.checkIdents("time column", []string{p.TimeColumn}); err != nil {
				return err
			}
		}
		return e.checkIdents("key column", p.Key)
	case warehouse.StepSwap:
		if err := e.checkQualified(p.Table); err != nil {
			return err
		}
		return e.checkQualified(p.View)
	}
	return nil
}

// pgIngestStep is the body of ApplyIngest's transaction: the marker (a
// replay stops here), the fence, the predecessor check, the data.
func pgIngestStep(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams, duck *sql.DB) (warehouse.IngestResult, error) {
	var res warehouse.IngestResult
	if p.Step == warehouse.StepFence {
		return res, pgFenceStep(ctx, tx, p)
	}
	kind, idx := p.Marker()
	tag, err := exec(ctx, tx, "INSERT INTO "+markersTable+" VALUES ($1, $2, $3, $4, 0, now()) ON CONFLICT DO NOTHING",
		p.Source, p.Generation, kind, idx)
	if err != nil {
		return res, err
	}
	if tag.RowsAffected() == 0 {
		return res, fmt.Errorf("%w: %s", warehouse.ErrAlreadyApplied, p.Describe())
	}
	fenceCol := "planned_generation"
	if p.Step == warehouse.StepBatch && !p.CatchUp {
		fenceCol = "serving_generation"
	}
	tag, err = exec(ctx, tx, "UPDATE "+fencesTable+" SET updated_at = now() WHERE source = $1 AND "+fenceCol+" = $2", p.Source, p.Generation)
	if err != nil {
		return res, err
	}
	if tag.RowsAffected() != 1 {
		return res, fmt.Errorf("%w: %s: the fence's %s is not %d", warehouse.ErrFenced, p.Describe(), fenceCol, p.Generation)
	}
	switch p.Step {
	case warehouse.StepChunk:
		if p.Index > 0 {
			if err := pgRequireMarker(ctx, tx, p, warehouse.MarkerChunk, warehouse.MarkerChunk, p.Index-1); err != nil {
				return res, err
			}
		}
		res, err = pgWriteRows(ctx, tx, p, duck)
	case warehouse.StepBatch:
		if err := pgRequireMarker(ctx, tx, p, warehouse.MarkerBatch, warehouse.MarkerCovered, p.Index-1); err != nil {
			return res, err
		}
		res, err = pgWriteRows(ctx, tx, p, duck)
	case warehouse.StepSwap:
		err = pgSwapStep(ctx, tx, p)
	}
	if err != nil {
		return res, err
	}
	if _, err := exec(ctx, tx, "UPDATE "+markersTable+` SET "rows" = $5 WHERE source = $1 AND generation = $2 AND kind = $3 AND idx = $4`,
		p.Source, p.Generation, kind, idx, res.Rows); err != nil {
		return res, err
	}
	return res, nil
}

// pgFenceStep moves the planned generation from p.From to p.Generation and
// writes the new generation's covered marker.
func pgFenceStep(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams) error {
	var n int64
	if p.From == 0 {
		tag, err := exec(ctx, tx, "INSERT INTO "+fencesTable+" VALUES ($1, $2, 0, now()) ON CONFLICT DO NOTHING", p.Source, p.Generation)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
	} else {
		tag, err := exec(ctx, tx, "UPDATE "+fencesTable+" SET planned_generation = $3, updated_at = now() WHERE source = $1 AND planned_generation = $2",
			p.Source, p.From, p.Generation)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
	}
	if n != 1 {
		var planned int64
		err := tx.QueryRow(ctx, "SELECT planned_generation FROM "+fencesTable+" WHERE source = $1", p.Source).Scan(&planned)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: %s: the warehouse has no fence", warehouse.ErrFenced, p.Describe())
		case err != nil:
			return err
		case planned == p.Generation:
			return fmt.Errorf("%w: %s: generation %d is planned already", warehouse.ErrAlreadyApplied, p.Describe(), p.Generation)
		}
		return fmt.Errorf("%w: %s: the warehouse has planned generation %d", warehouse.ErrFenced, p.Describe(), planned)
	}
	_, err := exec(ctx, tx, "INSERT INTO "+markersTable+" VALUES ($1, $2, $3, $4, 0, now()) ON CONFLICT DO NOTHING",
		p.Source, p.Generation, warehouse.MarkerCovered, p.Covered)
	return err
}

// pgRequireMarker fails with warehouse.ErrOutOfOrder unless p's generation
// has a marker of kind a or b with index idx.
func pgRequireMarker(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams, a, b string, idx int64) error {
	var found bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+markersTable+" WHERE source = $1 AND generation = $2 AND kind IN ($3, $4) AND idx = $5)",
		p.Source, p.Generation, a, b, idx).Scan(&found); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %s: %s %d of generation %d is not applied", warehouse.ErrOutOfOrder, p.Describe(), a, idx, p.Generation)
	}
	return nil
}

// stagedRows is the rows of staged files, read by an embedded DuckDB: a
// pgx.CopyFromSource.
type stagedRows struct {
	rows  *sql.Rows
	cols  []string
	types []string // PostgreSQL types
	vals  []any    // the current row; reused: COPY encodes a row before asking for the next
	ptrs  []any    // pointers to vals, for Scan
	err   error
	// With a time column (watchTime): its index in cols, the least and
	// greatest time read, and how many rows are older than lateBefore.
	timeAt     int
	lateBefore time.Time
	lo, hi     time.Time
	late       int64
}

// watchTime makes s fold p.TimeColumn over the rows it hands on: the
// written rows' times, read as COPY streams them. A time column the
// staged rows lack, or that is no date or timestamp, is refused, naming
// it.
func (s *stagedRows) watchTime(p warehouse.IngestParams) error {
	s.timeAt = -1
	if p.TimeColumn == "" {
		return nil
	}
	for i, c := range s.cols {
		if c != p.TimeColumn {
			continue
		}
		switch s.types[i] {
		case "date", "timestamp", "timestamptz":
		default:
			return fmt.Errorf("%w: time column %q of the staged rows of %s is %s, not a timestamp or date", warehouse.ErrInvalidType, p.TimeColumn, p.Describe(), s.types[i])
		}
		s.timeAt, s.lateBefore = i, p.LateBefore.UTC()
		return nil
	}
	return fmt.Errorf("%w: time column %q is not a column of the staged files of %s", warehouse.ErrInvalidArgument, p.TimeColumn, p.Describe())
}

// withStaged reads f (without the rows at or below pin) with the
// in-memory DuckDB db and hands the rows to fn, closing them after it.
func withStaged(ctx context.Context, db *sql.DB, f warehouse.StagedFiles, pin int64, fn func(*stagedRows) (int64, error)) (int64, error) {
	q := f.DuckDBSelect(pin)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, &stepError{sql: q, err: fmt.Errorf("reading staged files: %w", err)}
	}
	defer rows.Close() //nolint:errcheck // rows.Err below reports what a read lost
	cts, err := rows.ColumnTypes()
	if err != nil {
		return 0, err
	}
	s := &stagedRows{rows: rows, timeAt: -1}
	for _, ct := range cts {
		pt, ok := pgTypeOf(ct.DatabaseTypeName())
		if !ok {
			return 0, fmt.Errorf("%w: staged column %q has DuckDB type %s, which the PostgreSQL engine does not land",
				warehouse.ErrInvalidType, ct.Name(), ct.DatabaseTypeName())
		}
		s.cols = append(s.cols, ct.Name())
		s.types = append(s.types, pt)
	}
	n, err := fn(s)
	if err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, &stepError{sql: q, err: fmt.Errorf("reading staged files: %w", err)}
	}
	return n, nil
}

// pgTypeOf maps a DuckDB column type to the PostgreSQL type it lands as.
func pgTypeOf(duck string) (string, bool) {
	switch strings.ToUpper(duck) {
	case "BOOLEAN":
		return "boolean", true
	case "TINYINT", "SMALLINT", "UTINYINT":
		return "smallint", true
	case "INTEGER", "USMALLINT":
		return "integer", true
	case "BIGINT", "UINTEGER":
		return "bigint", true
	case "FLOAT":
		return "real", true
	case "DOUBLE":
		return "double precision", true
	case "VARCHAR":
		return "text", true
	case "BLOB":
		return "bytea", true
	case "DATE":
		return "date", true
	case "TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S":
		return "timestamp", true
	case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		return "timestamptz", true
	case "HUGEINT", "UBIGINT":
		return "numeric", true
	case "UUID":
		return "uuid", true
	}
	var w, sc int
	if n, err := fmt.Sscanf(duck, "DECIMAL(%d,%d)", &w, &sc); err == nil && n == 2 {
		return fmt.Sprintf("numeric(%d,%d)", w, sc), true
	}
	return "", false
}

// Next, Values and Err make stagedRows a pgx.CopyFromSource.
func (s *stagedRows) Next() bool {
	if !s.rows.Next() {
		s.err = s.rows.Err()
		return false
	}
	if s.ptrs == nil {
		s.vals = make([]any, len(s.cols))
		s.ptrs = make([]any, len(s.cols))
		for i := range s.vals {
			s.ptrs[i] = &s.vals[i]
		}
	}
	if err := s.rows.Scan(s.ptrs...); err != nil {
		s.err = err
		return false
	}
	for i, v := range s.vals {
		if t, ok := v.(time.Time); ok {
			s.vals[i] = t.UTC()
		}
	}
	if s.timeAt >= 0 {
		if t, ok := s.vals[s.timeAt].(time.Time); ok {
			if s.hi.IsZero() || t.Before(s.lo) {
				s.lo = t
			}
			if s.hi.IsZero() || t.After(s.hi) {
				s.hi = t
			}
			if !s.lateBefore.IsZero() && t.Before(s.lateBefore) {
				s.late++
			}
		}
	}
	return true
}

func (s *stagedRows) Values() ([]any, error) { return s.vals, nil }
func (s *stagedRows) Err() error             { return s.err }

// pgWriteRows writes p's rows into p.Table: chunk 0 (re-)creates the table
// from the files' columns (a crash may have left a half-built one, whose
// markers rolled back with it); otherwise by p.Apply (chunks append, or
// upsert).
func pgWriteRows(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams, duck *sql.DB) (warehouse.IngestResult, error) {
	var res warehouse.IngestResult
	if p.Skip {
		return res, nil // a skip writes its marker only
	}
	n, err := withStaged(ctx, duck, p.Files, p.Pin, func(src *stagedRows) (n int64, err error) {
		if err := src.watchTime(p); err != nil {
			return 0, err
		}
		n, res.Replaced, err = pgWriteStaged(ctx, tx, p, src)
		res.MinTime, res.MaxTime, res.Late = src.lo, src.hi, src.late
		return n, err
	})
	if err != nil {
		return warehouse.IngestResult{}, err
	}
	res.Rows = n
	return res, nil
}

// pgWriteStaged is pgWriteRows once the staged files are open.
func pgWriteStaged(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams, src *stagedRows) (rows, replaced int64, err error) {
	ident := pgx.Identifier{p.Table.Schema, p.Table.Name}
	t := quoteTable(p.Table)
	copyIn := func(into pgx.Identifier) (int64, error) {
		n, err := tx.CopyFrom(ctx, into, src.cols, src)
		if err != nil {
			return 0, &stepError{sql: "COPY " + into.Sanitize() + " FROM STDIN BINARY", err: fmt.Errorf("copying staged files %s: %w", strings.Join(p.Files.Paths, ", "), err)}
		}
		return n, nil
	}
	if p.Step == warehouse.StepChunk && p.Index == 0 {
		if _, err := exec(ctx, tx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(p.Table.Schema)); err != nil {
			return 0, 0, err
		}
		if _, err := exec(ctx, tx, "DROP TABLE IF EXISTS "+t); err != nil {
			return 0, 0, err
		}
		defs := make([]string, len(src.cols))
		for i, c := range src.cols {
			defs[i] = quoteIdent(c) + " " + src.types[i]
		}
		if _, err := exec(ctx, tx, "CREATE TABLE "+t+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return 0, 0, err
		}
		rows, err := copyIn(ident)
		return rows, 0, err
	}
	if _, err := lockTable(ctx, tx, p.Table); err != nil {
		return 0, 0, err
	}
	apply := p.Apply
	if p.Step == warehouse.StepChunk && apply != warehouse.IngestUpsert {
		apply = warehouse.IngestAppend
	}
	switch apply {
	case warehouse.IngestReplace:
		if _, err := exec(ctx, tx, "DELETE FROM "+t); err != nil {
			return 0, 0, err
		}
	case warehouse.IngestUpsert:
		return pgUpsert(ctx, tx, p, src, copyIn)
	}
	rows, err = copyIn(ident)
	return rows, 0, err
}

// pgUpsert stages the rows in a temporary table, refuses a key staged
// twice (warehouse.ErrDuplicateKey), deletes the table's rows whose key
// matches (NULL-safely) and inserts the staged rows.
func pgUpsert(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams, src *stagedRows, copyIn func(pgx.Identifier) (int64, error)) (rows, replaced int64, err error) {
	for _, k := range p.Key {
		if !containsString(src.cols, k) {
			return 0, 0, fmt.Errorf("%w: key column %q is not a column of the staged files of %s", warehouse.ErrInvalidArgument, k, p.Describe())
		}
	}
	tmp, err := tempName()
	if err != nil {
		return 0, 0, err
	}
	if _, err := exec(ctx, tx, "CREATE TEMP TABLE "+quoteIdent(tmp)+" (LIKE "+quoteTable(p.Table)+") ON COMMIT DROP"); err != nil {
		return 0, 0, err
	}
	if _, err := copyIn(pgx.Identifier{tmp}); err != nil {
		return 0, 0, err
	}
	keys := make([]string, len(p.Key))
	match := make([]string, len(p.Key))
	for i, k := range p.Key {
		keys[i] = quoteIdent(k)
		match[i] = "t." + quoteIdent(k) + " IS NOT DISTINCT FROM s." + quoteIdent(k)
	}
	var dup bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+quoteIdent(tmp)+" GROUP BY "+strings.Join(keys, ", ")+" HAVING count(*) > 1)").Scan(&dup); err != nil {
		return 0, 0, err
	}
	if dup {
		return 0, 0, fmt.Errorf("%w: the staged rows of %s hold a key more than once", warehouse.ErrDuplicateKey, p.Describe())
	}
	del, err := exec(ctx, tx, "DELETE FROM "+quoteTable(p.Table)+" AS t USING "+quoteIdent(tmp)+" AS s WHERE "+strings.Join(match, " AND "))
	if err != nil {
		return 0, 0, err
	}
	cols := make([]string, len(src.cols))
	for i, c := range src.cols {
		cols[i] = quoteIdent(c)
	}
	list := strings.Join(cols, ", ")
	tag, err := exec(ctx, tx, "INSERT INTO "+quoteTable(p.Table)+" ("+list+") SELECT "+list+" FROM "+quoteIdent(tmp))
	if err != nil {
		return 0, 0, err
	}
	return tag.RowsAffected(), del.RowsAffected(), nil
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// catchUpSQL: see the DuckDB engine's; the same rule.
const catchUpSQL = `SELECT f.serving_generation,
  (SELECT coalesce(max(idx), 0) FROM gapless__ingest.markers m
    WHERE m.source = f.source AND m.generation = f.serving_generation AND m.kind = 'batch'),
  (SELECT coalesce(max(idx), 0) FROM gapless__ingest.markers m
    WHERE m.source = f.source AND m.generation = $2 AND m.kind IN ('batch', 'covered'))
FROM gapless__ingest.fences f WHERE f.source = $1`

// pgSwapStep checks that every chunk is applied and that p's generation
// has caught up with the serving one, then makes it serve: the fence's
// serving generation and the view, replaced in place so that the views
// reading it stay bound (or, when the columns changed, rebuilt beside and
// swapped in with its dependents, as CreateOrReplaceView does). Nothing
// is dropped.
func pgSwapStep(ctx context.Context, tx pgx.Tx, p warehouse.IngestParams) error {
	var chunks int64
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+markersTable+" WHERE source = $1 AND generation = $2 AND kind = $3 AND idx < $4",
		p.Source, p.Generation, warehouse.MarkerChunk, p.Chunks).Scan(&chunks); err != nil {
		return err
	}
	if chunks != p.Chunks {
		return fmt.Errorf("%w: %s: %d of its %d chunks are applied", warehouse.ErrOutOfOrder, p.Describe(), chunks, p.Chunks)
	}
	var serving, need, have int64
	if err := tx.QueryRow(ctx, catchUpSQL, p.Source, p.Generation).Scan(&serving, &need, &have); err != nil {
		return err
	}
	if have < need {
		return fmt.Errorf("%w: %s: serving generation %d has applied batch %d, generation %d only up to %d",
			warehouse.ErrBehind, p.Describe(), serving, need, p.Generation, have)
	}
	if _, err := exec(ctx, tx, "UPDATE "+fencesTable+" SET serving_generation = $2 WHERE source = $1", p.Source, p.Generation); err != nil {
		return err
	}
	if _, err := exec(ctx, tx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(p.View.Schema)); err != nil {
		return err
	}
	if err := lockName(ctx, tx, p.View); err != nil {
		return err
	}
	if rel, found, err := resolve(ctx, tx, p.View); err != nil {
		return err
	} else if found && rel.kind != relkindView {
		return fmt.Errorf("%w: %s is a table, not the view that serves source %s", warehouse.ErrNotATable, p.View, p.Source)
	}
	v := newViewStmt(p.View, "SELECT * FROM "+quoteTable(p.Table))
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	_, rerr := execOne(ctx, sp, v.replaceSQL)
	if rerr == nil {
		return sp.Commit(ctx)
	}
	if err := sp.Rollback(ctx); err != nil {
		return err
	}
	return swapView(ctx, tx, v, rerr)
}

// IngestState reads source's fence and markers (see warehouse.Ingester), in
// one snapshot. A warehouse that never ran a step has no fence: Exists is
// false.
func (e *Engine) IngestState(ctx context.Context, source string) (warehouse.IngestState, error) {
	const op = "read ingest state"
	var st warehouse.IngestState
	err := pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", markersTable).Scan(&exists); err != nil || !exists {
			return err
		}
		err := tx.QueryRow(ctx, "SELECT planned_generation, serving_generation FROM "+fencesTable+" WHERE source = $1", source).
			Scan(&st.PlannedGeneration, &st.ServingGeneration)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			st.Exists = true
		}
		rows, err := tx.Query(ctx, `SELECT generation, kind, idx, "rows", applied_at FROM `+markersTable+
			" WHERE source = $1 ORDER BY generation, kind, idx", source)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m warehouse.IngestMarker
			if err := rows.Scan(&m.Generation, &m.Kind, &m.Index, &m.Rows, &m.AppliedAt); err != nil {
				return err
			}
			m.AppliedAt = m.AppliedAt.UTC()
			st.Markers = append(st.Markers, m)
		}
		return rows.Err()
	})
	if err != nil {
		return warehouse.IngestState{}, fail(op, source, "", err)
	}
	return st, nil
}

var _ warehouse.GenerationDropper = (*Engine)(nil)

// DropGeneration drops a generation's table and markers (see
// warehouse.GenerationDropper) in one transaction that locks the source's
// fence row first (FOR UPDATE): a fence step or a swap, which update that
// row, waits for the drop or is seen by it.
func (e *Engine) DropGeneration(ctx context.Context, p warehouse.DropGenerationParams) (warehouse.DropGenerationResult, error) {
	const op = "drop generation"
	object := fmt.Sprintf("%s generation %d", p.Source, p.Generation)
	if err := p.Validate(); err != nil {
		return warehouse.DropGenerationResult{}, fail(op, object, "", err)
	}
	if containsNUL(p.Source) {
		return warehouse.DropGenerationResult{}, fail(op, object, "", fmt.Errorf("%w: source name %q contains a NUL byte", warehouse.ErrInvalidArgument, p.Source))
	}
	if err := e.checkQualified(p.Table); err != nil {
		return warehouse.DropGenerationResult{}, fail(op, object, "", err)
	}
	if err := e.ensureIngest(ctx); err != nil {
		return warehouse.DropGenerationResult{}, failStep(op, object, err)
	}
	var res warehouse.DropGenerationResult
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		res = warehouse.DropGenerationResult{}
		var planned, serving int64
		err := tx.QueryRow(ctx, "SELECT planned_generation, serving_generation FROM "+fencesTable+" WHERE source = $1 FOR UPDATE", p.Source).
			Scan(&planned, &serving)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case planned == p.Generation || serving == p.Generation:
			return fmt.Errorf("%w: generation %d of source %s is the fence's planned or serving generation", warehouse.ErrFenced, p.Generation, p.Source)
		}
		if err := lockName(ctx, tx, p.Table); err != nil {
			return err
		}
		rel, found, err := resolve(ctx, tx, p.Table)
		if err != nil {
			return err
		}
		if found && rel.kind == relkindTable {
			if _, err := exec(ctx, tx, "DROP TABLE "+quoteTable(p.Table)); err != nil {
				return err
			}
			res.TableDropped = true
		}
		tag, err := exec(ctx, tx, "DELETE FROM "+markersTable+" WHERE source = $1 AND generation = $2", p.Source, p.Generation)
		if err != nil {
			return err
		}
		res.Markers = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return warehouse.DropGenerationResult{}, failStep(op, object, err)
	}
	return res, nil
}
