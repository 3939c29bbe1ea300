package duckdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/gapless-dev/gapless/warehouse"
)

var _ warehouse.Ingester = (*Engine)(nil)

// ingestDDL creates the fence and marker tables (see warehouse.Ingester).
var ingestDDL = []string{
	"CREATE SCHEMA IF NOT EXISTS " + quoteIdent(warehouse.IngestSchema),
	"CREATE TABLE IF NOT EXISTS " + fencesTable + ` (source VARCHAR PRIMARY KEY,
  planned_generation BIGINT NOT NULL, serving_generation BIGINT NOT NULL, updated_at TIMESTAMPTZ NOT NULL)`,
	"CREATE TABLE IF NOT EXISTS " + markersTable + ` (source VARCHAR NOT NULL, generation BIGINT NOT NULL,
  kind VARCHAR NOT NULL, idx BIGINT NOT NULL, "rows" BIGINT NOT NULL, applied_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (source, generation, kind, idx))`,
}

var (
	fencesTable  = quoteTable(warehouse.Table{Schema: warehouse.IngestSchema, Name: "fences"})
	markersTable = quoteTable(warehouse.Table{Schema: warehouse.IngestSchema, Name: "markers"})
)

// ApplyIngest runs one ingestion step (see warehouse.Ingester) in one
// transaction, holding the database's write lock exclusively: steps of one
// process take turns, so a second applier of one step finds the first's
// marker and writes nothing. Should two transactions still race on one
// marker, DuckDB fails the second at COMMIT (or, when the first committed
// before it inserted, at that insert) with a constraint violation, which
// rolls its data back: that is reported as warehouse.ErrAlreadyApplied too
// (warehouse.ErrFenced for a fence step, whose compare-and-swap lost).
//
// Staged files are read by DuckDB itself (read_parquet, read_csv,
// read_json) inside the transaction; columns are matched by name. The
// fence and marker tables are created by the first step of the process
// (again after a step failed for another reason than a refusal), not by
// every step.
func (e *Engine) ApplyIngest(ctx context.Context, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	const op = "apply ingest"
	object := p.Describe()
	if err := e.checkIngest(p); err != nil {
		return warehouse.IngestResult{}, fail(op, object, err)
	}
	var res warehouse.IngestResult
	stepDone := false // the step's statements all ran: a failure is the COMMIT's
	err := e.write(ctx, func(s *session) error {
		defer e.shared.cols.forget(p.Table, p.View)
		if !e.shared.ingestReady.Load() {
			for _, ddl := range ingestDDL {
				if _, err := s.exec(ctx, ddl); err != nil {
					return err
				}
			}
			e.shared.ingestReady.Store(true)
		}
		step := func() error {
			return s.inTx(ctx, func() error {
				var err error
				res, err = ingestStep(ctx, s, p)
				stepDone = err == nil
				return err
			})
		}
		var err error
		if p.Step == warehouse.StepChunk {
			err = unordered(ctx, s, step)
		} else {
			err = step()
		}
		if err != nil && !ingestOutcome(err) {
			// The fence and marker tables may be what failed (dropped
			// behind the engine's back): the next step creates them again.
			e.shared.ingestReady.Store(false)
		}
		return err
	})
	if err != nil && stepDone && commitConflict(err) {
		outcome := warehouse.ErrAlreadyApplied
		if p.Step == warehouse.StepFence {
			outcome = warehouse.ErrFenced
		}
		err = fmt.Errorf("%w: a concurrent transaction committed it first: %w", outcome, err)
	}
	if err != nil {
		return warehouse.IngestResult{}, fail(op, object, err)
	}
	return res, nil
}

// unordered runs fn on s with DuckDB's preserve_insertion_order off: a
// chunk's rows (up to ChunkFiles files) are then written by every thread
// as it reads them, instead of in the files' order, which on 2 cores
// loads a chunk of 1 million rows in about 0.7 times the time
// (BenchmarkIngestBuild). A table's rows have no order, and nothing of an
// ingest step depends on it. The setting is reset after fn, also when fn
// failed; a connection that could not reset it is discarded, so it never
// reaches another statement (fn's outcome stands: its step committed or
// not).
func unordered(ctx context.Context, s *session, fn func() error) error {
	if _, err := s.exec(ctx, "SET preserve_insertion_order = false"); err != nil {
		return err
	}
	err := fn()
	if _, rerr := s.exec(context.WithoutCancel(ctx), "RESET preserve_insertion_order"); rerr != nil {
		s.discard()
	}
	return err
}

// checkIngest validates p and its names.
func (e *Engine) checkIngest(p warehouse.IngestParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := checkText(warehouse.ErrInvalidArgument, "source", p.Source); err != nil {
		return err
	}
	switch p.Step {
	case warehouse.StepChunk, warehouse.StepBatch:
		if err := checkTable(p.Table); err != nil {
			return err
		}
		for _, k := range p.Key {
			if err := checkIdent("key column", k); err != nil {
				return err
			}
		}
		if p.TimeColumn != "" {
			return checkIdent("time column", p.TimeColumn)
		}
	case warehouse.StepSwap:
		if err := checkTable(p.Table); err != nil {
			return err
		}
		if err := checkTable(p.View); err != nil {
			return err
		}
	}
	return nil
}

// ingestOutcome reports whether err is one of ApplyIngest's refusals
// (nothing written, the database as it was).
func ingestOutcome(err error) bool {
	return errors.Is(err, warehouse.ErrAlreadyApplied) || errors.Is(err, warehouse.ErrFenced) ||
		errors.Is(err, warehouse.ErrBehind) || errors.Is(err, warehouse.ErrOutOfOrder)
}

// commitConflict reports whether err, the failure of a COMMIT or of the
// step's marker insert, is DuckDB refusing it for a duplicate key: the
// loser of two transactions that inserted one marker (the step's only
// insert under a unique key that another transaction can share). A
// constraint failure of any other statement of the step is not one: the
// callers only ask about those two.
func commitConflict(err error) bool {
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypeConstraint {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "Failed to commit") && strings.Contains(msg, "constraint violation")
}

// insertMarkerSQL records a step's marker ($1 source, $2 generation, $3
// kind, $4 index, $5 rows): the last statement of the step's transaction.
var insertMarkerSQL = "INSERT INTO " + markersTable + " VALUES ($1, $2, $3, $4, $5, now())"

// ingestStep runs p's statements inside the open transaction of s and
// returns the rows written: the gate (one UPDATE of the source's fence row
// that matches only when the step's marker is absent, the fence holds
// p.Generation and, for a chunk or batch, its predecessor's marker is
// there), the data, the marker. The gate is the fence check: a concurrent
// transaction moving the fence writes the same row, so one of the two
// fails. When the gate matches nothing, why is read after it, in the
// order: the marker (a replay: ErrAlreadyApplied), the fence (ErrFenced),
// the predecessor (ErrOutOfOrder).
//
// The marker is inserted last, with the rows written, so that a step is
// two statements beside its data (the gate and the marker; it was five:
// an INSERT … ON CONFLICT DO NOTHING of the marker, which alone took about
// a millisecond more than a plain INSERT, the fence UPDATE, the
// predecessor's SELECT, and the marker's UPDATE with its rows). The gate
// has read the marker absent in the transaction's snapshot, so the insert
// fails only when a concurrent transaction committed the same step first,
// which is ErrAlreadyApplied (as DuckDB's refusal of the loser's COMMIT
// is).
func ingestStep(ctx context.Context, s *session, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	var res warehouse.IngestResult
	if p.Step == warehouse.StepFence {
		return res, fenceStep(ctx, s, p)
	}
	kind, idx := p.Marker()
	fenceCol := "planned_generation"
	if p.Step == warehouse.StepBatch && !p.CatchUp {
		fenceCol = "serving_generation"
	}
	markerAbsent := " AND NOT EXISTS (SELECT 1 FROM " + markersTable + " WHERE source = $1 AND generation = $2 AND kind = $3 AND idx = $4)"
	args := []any{p.Source, p.Generation, kind, idx}
	var pred []string // the predecessor's marker kinds (none: no predecessor)
	switch {
	case p.Step == warehouse.StepChunk && p.Index > 0:
		pred = []string{warehouse.MarkerChunk, warehouse.MarkerChunk}
	case p.Step == warehouse.StepBatch:
		pred = []string{warehouse.MarkerBatch, warehouse.MarkerCovered}
	}
	predPresent := "true"
	if pred != nil {
		predPresent = "EXISTS (SELECT 1 FROM " + markersTable + " WHERE source = $1 AND generation = $2 AND kind IN ($5, $6) AND idx = $7)"
		args = append(args, pred[0], pred[1], p.Index-1)
	}
	n, err := s.exec(ctx, "UPDATE "+fencesTable+" SET updated_at = now() WHERE source = $1 AND "+fenceCol+" = $2"+
		markerAbsent+" AND "+predPresent, args...)
	if err != nil {
		return res, err
	}
	if n != 1 {
		return res, gateRefusal(ctx, s, p, fenceCol, markerAbsent, predPresent, args)
	}
	switch p.Step {
	case warehouse.StepChunk, warehouse.StepBatch:
		res, err = writeRows(ctx, s, p)
	case warehouse.StepSwap:
		err = swapStep(ctx, s, p)
	}
	if err != nil {
		return res, err
	}
	if _, err := s.exec(ctx, insertMarkerSQL, p.Source, p.Generation, kind, idx, res.Rows); err != nil {
		if commitConflict(err) {
			return res, fmt.Errorf("%w: %s: a concurrent transaction committed it first: %w", warehouse.ErrAlreadyApplied, p.Describe(), err)
		}
		return res, err
	}
	return res, nil
}

// gateRefusal says why ingestStep's gate matched nothing, in its order.
func gateRefusal(ctx context.Context, s *session, p warehouse.IngestParams, fenceCol, markerAbsent, predPresent string, args []any) error {
	res, err := s.query(ctx, "SELECT true"+markerAbsent+", (SELECT "+fenceCol+" FROM "+fencesTable+" WHERE source = $1), "+predPresent, args...)
	if err != nil {
		return err
	}
	r := res.Rows[0]
	switch {
	case r[0] != true:
		return fmt.Errorf("%w: %s", warehouse.ErrAlreadyApplied, p.Describe())
	case r[1] == nil || asInt64(r[1]) != p.Generation:
		return fmt.Errorf("%w: %s: the fence's %s is not %d", warehouse.ErrFenced, p.Describe(), fenceCol, p.Generation)
	case r[2] != true:
		kind := warehouse.MarkerChunk
		if p.Step == warehouse.StepBatch {
			kind = warehouse.MarkerBatch
		}
		return fmt.Errorf("%w: %s: %s %d of generation %d is not applied", warehouse.ErrOutOfOrder, p.Describe(), kind, p.Index-1, p.Generation)
	}
	return fmt.Errorf("%s: the fence row of source %s was not updated", p.Describe(), p.Source)
}

// fenceStep moves the planned generation from p.From to p.Generation and
// writes the new generation's covered marker.
func fenceStep(ctx context.Context, s *session, p warehouse.IngestParams) error {
	var n int64
	var err error
	if p.From == 0 {
		n, err = s.exec(ctx, "INSERT INTO "+fencesTable+" VALUES ($1, $2, 0, now()) ON CONFLICT DO NOTHING", p.Source, p.Generation)
	} else {
		n, err = s.exec(ctx, "UPDATE "+fencesTable+" SET planned_generation = $3, updated_at = now() WHERE source = $1 AND planned_generation = $2",
			p.Source, p.From, p.Generation)
	}
	if err != nil {
		return err
	}
	if n != 1 {
		res, err := s.query(ctx, "SELECT planned_generation FROM "+fencesTable+" WHERE source = $1", p.Source)
		if err != nil {
			return err
		}
		if len(res.Rows) == 1 && asInt64(res.Rows[0][0]) == p.Generation {
			return fmt.Errorf("%w: %s: generation %d is planned already", warehouse.ErrAlreadyApplied, p.Describe(), p.Generation)
		}
		planned := "no fence"
		if len(res.Rows) == 1 {
			planned = fmt.Sprintf("planned generation %d", asInt64(res.Rows[0][0]))
		}
		return fmt.Errorf("%w: %s: the warehouse has %s", warehouse.ErrFenced, p.Describe(), planned)
	}
	_, err = s.exec(ctx, "INSERT INTO "+markersTable+" VALUES ($1, $2, $3, $4, 0, now()) ON CONFLICT DO NOTHING",
		p.Source, p.Generation, warehouse.MarkerCovered, p.Covered)
	return err
}

// writeRows writes p's rows into p.Table: chunk 0 creates the table (or
// re-creates it: a crash may have left a half-built one behind, whose
// markers rolled back with it); otherwise by p.Apply (chunks append, or
// upsert). With p.TimeColumn, the written rows' times are read first, by
// one aggregate over the staged rows (of Parquet files, only that column
// is read).
func writeRows(ctx context.Context, s *session, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	if p.Skip {
		return warehouse.IngestResult{}, nil // a skip writes its marker only
	}
	src := "(" + p.Files.DuckDBSelect(p.Pin) + ")"
	t := quoteTable(p.Table)
	res, err := writtenTimes(ctx, s, p, src)
	if err != nil {
		return res, err
	}
	if p.Step == warehouse.StepChunk && p.Index == 0 {
		if _, err := s.exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(p.Table.Schema)); err != nil {
			return res, err
		}
		if _, err := s.exec(ctx, "CREATE OR REPLACE TABLE "+t+" AS SELECT * FROM "+src); err != nil {
			return res, err
		}
		q, err := s.query(ctx, "SELECT count(*) FROM "+t)
		if err != nil {
			return res, err
		}
		res.Rows = asInt64(q.Rows[0][0])
		return res, nil
	}
	apply := p.Apply
	if p.Step == warehouse.StepChunk && apply != warehouse.IngestUpsert {
		apply = warehouse.IngestAppend
	}
	switch apply {
	case warehouse.IngestReplace:
		if _, err := s.exec(ctx, "DELETE FROM "+t); err != nil {
			return res, err
		}
	case warehouse.IngestUpsert:
		res.Rows, res.Replaced, err = upsertRows(ctx, s, p, src)
		return res, err
	}
	res.Rows, err = s.exec(ctx, "INSERT INTO "+t+" BY NAME SELECT * FROM "+src)
	return res, err
}

// writtenTimes reads the least and greatest p.TimeColumn of the staged
// rows src, and how many are older than p.LateBefore (nothing without a
// TimeColumn). A time column the staged rows do not hold is
// warehouse.ErrInvalidArgument, naming it.
func writtenTimes(ctx context.Context, s *session, p warehouse.IngestParams, src string) (warehouse.IngestResult, error) {
	var res warehouse.IngestResult
	if p.TimeColumn == "" {
		return res, nil
	}
	c := quoteIdent(p.TimeColumn)
	late := "0"
	var args []any
	if !p.LateBefore.IsZero() {
		late, args = "count(*) FILTER (WHERE "+c+" < $1)", []any{p.LateBefore.UTC()}
	}
	q, err := s.query(ctx, "SELECT min("+c+"), max("+c+"), "+late+" FROM "+src, args...)
	if err != nil {
		return res, fmt.Errorf("%w: reading time column %q of the staged rows of %s: %w", warehouse.ErrInvalidArgument, p.TimeColumn, p.Describe(), err)
	}
	r := q.Rows[0]
	lo, okLo := r[0].(time.Time)
	hi, okHi := r[1].(time.Time)
	switch {
	case r[1] == nil:
	case !okLo || !okHi:
		return res, fmt.Errorf("%w: time column %q of the staged rows of %s is %T, not a timestamp or date", warehouse.ErrInvalidType, p.TimeColumn, p.Describe(), r[1])
	default:
		res.MinTime, res.MaxTime = lo.UTC(), hi.UTC()
	}
	res.Late = asInt64(r[2])
	return res, nil
}

// upsertRows replaces the rows of p.Table whose p.Key matches a staged
// row (NULL-safely) and inserts the rest; a key staged twice is
// warehouse.ErrDuplicateKey. It returns the rows inserted and those
// replaced (deleted).
func upsertRows(ctx context.Context, s *session, p warehouse.IngestParams, src string) (rows, replaced int64, err error) {
	tmp, err := tempName("gapless_ingest_")
	if err != nil {
		return 0, 0, err
	}
	qtmp := "temp.main." + quoteIdent(tmp)
	if _, err := s.exec(ctx, "CREATE TEMP TABLE "+quoteIdent(tmp)+" AS SELECT * FROM "+src); err != nil {
		return 0, 0, err
	}
	keys := make([]string, len(p.Key))
	match := make([]string, len(p.Key))
	for i, k := range p.Key {
		keys[i] = quoteIdent(k)
		match[i] = "t." + quoteIdent(k) + " IS NOT DISTINCT FROM s." + quoteIdent(k)
	}
	dup, err := s.findsRows(ctx, "SELECT 1 FROM "+qtmp+" GROUP BY "+strings.Join(keys, ", ")+" HAVING count(*) > 1 LIMIT 1")
	if err != nil {
		return 0, 0, err
	}
	if dup {
		return 0, 0, fmt.Errorf("%w: the staged rows of %s hold a key more than once", warehouse.ErrDuplicateKey, p.Describe())
	}
	replaced, err = s.exec(ctx, "DELETE FROM "+quoteTable(p.Table)+" AS t WHERE EXISTS (SELECT 1 FROM "+qtmp+" AS s WHERE "+strings.Join(match, " AND ")+")")
	if err != nil {
		return 0, 0, err
	}
	rows, err = s.exec(ctx, "INSERT INTO "+quoteTable(p.Table)+" BY NAME SELECT * FROM "+qtmp)
	if err != nil {
		return 0, 0, err
	}
	_, err = s.exec(ctx, "DROP TABLE "+qtmp)
	return rows, replaced, err
}

// swapStep checks that every chunk is applied and that p's generation has
// caught up with the serving one, then makes it serve: the fence's serving
// generation and the view. Nothing is dropped.
func swapStep(ctx context.Context, s *session, p warehouse.IngestParams) error {
	res, err := s.query(ctx, "SELECT count(*) FROM "+markersTable+" WHERE source = $1 AND generation = $2 AND kind = $3 AND idx < $4",
		p.Source, p.Generation, warehouse.MarkerChunk, p.Chunks)
	if err != nil {
		return err
	}
	if got := asInt64(res.Rows[0][0]); got != p.Chunks {
		return fmt.Errorf("%w: %s: %d of its %d chunks are applied", warehouse.ErrOutOfOrder, p.Describe(), got, p.Chunks)
	}
	res, err = s.query(ctx, catchUpSQL, p.Source, p.Generation)
	if err != nil {
		return err
	}
	serving, need, have := asInt64(res.Rows[0][0]), asInt64(res.Rows[0][1]), asInt64(res.Rows[0][2])
	if have < need {
		return fmt.Errorf("%w: %s: serving generation %d has applied batch %d, generation %d only up to %d",
			warehouse.ErrBehind, p.Describe(), serving, need, p.Generation, have)
	}
	if _, err := s.exec(ctx, "UPDATE "+fencesTable+" SET serving_generation = $2 WHERE source = $1", p.Source, p.Generation); err != nil {
		return err
	}
	if _, err := s.exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(p.View.Schema)); err != nil {
		return err
	}
	if isTable(ctx, s, p.View) {
		return refusef(warehouse.ErrNotATable, "%s is a table, not the view that serves source %s", p.View, p.Source)
	}
	_, err = s.exec(ctx, "CREATE OR REPLACE VIEW "+quoteTable(p.View)+" AS SELECT * FROM "+quoteTable(p.Table))
	return err
}

// catchUpSQL returns, for source $1 and new generation $2: the serving
// generation, the last batch it applied, and the last batch the new one
// applied or covers. Batches apply in order, so the maxima compare them.
const catchUpSQL = `SELECT f.serving_generation,
  (SELECT coalesce(max(idx), 0) FROM gapless__ingest.markers m
    WHERE m.source = f.source AND m.generation = f.serving_generation AND m.kind = 'batch'),
  (SELECT coalesce(max(idx), 0) FROM gapless__ingest.markers m
    WHERE m.source = f.source AND m.generation = $2 AND m.kind IN ('batch', 'covered'))
FROM gapless__ingest.fences f WHERE f.source = $1`

// isTable reports whether t names a base table.
func isTable(ctx context.Context, s *session, t warehouse.Table) bool {
	found, err := s.findsRows(ctx, "SELECT 1 FROM duckdb_tables() WHERE schema_name = $1 AND table_name = $2", t.Schema, t.Name)
	return err == nil && found
}

func asInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// ingestStateSQL reads source $1's fence (the row whose kind is NULL,
// first: planned and serving generation) and its markers, in one
// statement, so in one snapshot.
var ingestStateSQL = `SELECT * FROM (SELECT NULL::VARCHAR AS kind, planned_generation AS generation, serving_generation AS idx,
  NULL::BIGINT AS "rows", NULL::TIMESTAMPTZ AS applied_at FROM ` + fencesTable + ` WHERE source = $1
UNION ALL SELECT kind, generation, idx, "rows", applied_at FROM ` + markersTable + ` WHERE source = $1)
ORDER BY kind IS NOT NULL, generation, kind, idx`

// IngestState reads source's fence and markers (see warehouse.Ingester),
// in one statement. A warehouse that never ran a step has no fence:
// Exists is false. Whether the fence and marker tables exist is asked of
// the catalog only until this process has created or found them.
func (e *Engine) IngestState(ctx context.Context, source string) (warehouse.IngestState, error) {
	const op = "read ingest state"
	var st warehouse.IngestState
	err := e.read(ctx, func(s *session) error {
		if !e.shared.ingestReady.Load() {
			ok, err := s.findsRows(ctx, "SELECT 1 FROM duckdb_tables() WHERE schema_name = $1 AND table_name = 'markers'", warehouse.IngestSchema)
			if err != nil || !ok {
				return err
			}
		}
		res, err := s.query(ctx, ingestStateSQL, source)
		if err != nil {
			e.shared.ingestReady.Store(false) // the tables may be gone: ask the catalog again
			return err
		}
		for _, r := range res.Rows {
			if r[0] == nil {
				st.Exists = true
				st.PlannedGeneration, st.ServingGeneration = asInt64(r[1]), asInt64(r[2])
				continue
			}
			at, _ := r[4].(time.Time)
			st.Markers = append(st.Markers, warehouse.IngestMarker{
				Generation: asInt64(r[1]), Kind: fmt.Sprint(r[0]), Index: asInt64(r[2]), Rows: asInt64(r[3]), AppliedAt: at.UTC(),
			})
		}
		return nil
	})
	if err != nil {
		return warehouse.IngestState{}, fail(op, source, err)
	}
	return st, nil
}

var _ warehouse.GenerationDropper = (*Engine)(nil)

// DropGeneration drops a generation's table and markers (see
// warehouse.GenerationDropper) in one transaction under the database's
// write lock, which every ingestion step takes too: the fence read is
// still the fence when the drop commits.
func (e *Engine) DropGeneration(ctx context.Context, p warehouse.DropGenerationParams) (warehouse.DropGenerationResult, error) {
	const op = "drop generation"
	object := fmt.Sprintf("%s generation %d", p.Source, p.Generation)
	if err := p.Validate(); err != nil {
		return warehouse.DropGenerationResult{}, fail(op, object, err)
	}
	if err := checkTable(p.Table); err != nil {
		return warehouse.DropGenerationResult{}, fail(op, object, err)
	}
	var res warehouse.DropGenerationResult
	err := e.write(ctx, func(s *session) error {
		defer e.shared.cols.forget(p.Table)
		for _, ddl := range ingestDDL {
			if _, err := s.exec(ctx, ddl); err != nil {
				return err
			}
		}
		return s.inTx(ctx, func() error {
			res = warehouse.DropGenerationResult{}
			fenced, err := s.findsRows(ctx, "SELECT 1 FROM "+fencesTable+" WHERE source = $1 AND (planned_generation = $2 OR serving_generation = $2)",
				p.Source, p.Generation)
			if err != nil {
				return err
			}
			if fenced {
				return fmt.Errorf("%w: generation %d of source %s is the fence's planned or serving generation", warehouse.ErrFenced, p.Generation, p.Source)
			}
			if isTable(ctx, s, p.Table) {
				if _, err := s.exec(ctx, "DROP TABLE "+quoteTable(p.Table)); err != nil {
					return err
				}
				res.TableDropped = true
			}
			res.Markers, err = s.exec(ctx, "DELETE FROM "+markersTable+" WHERE source = $1 AND generation = $2", p.Source, p.Generation)
			return err
		})
	})
	if err != nil {
		return warehouse.DropGenerationResult{}, fail(op, object, err)
	}
	return res, nil
}
