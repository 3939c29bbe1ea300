package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// The sources state machine (state.SourceStore). Every transition runs the
// shared compare-and-swap of storekit inside one BEGIN IMMEDIATE
// transaction: the write lock is held from the read of the source's row to
// the commit, so what a transition checks is what it writes against, for
// every writer of the file in any process.

const sourceColumns = `name, connector, definition_hash, building_generation, serving_generation,
	last_generation, build_requested, parked_reason, deferred_for_generation,
	registered_at_us, updated_at_us, removed_at_us`

// sourceReadColumns are sourceColumns and the columns PutSource never
// writes: the queue head, last_batch_seq (SetQueue), the blocked batch
// (PutBlock) and the late rows (PutLateRows).
const sourceReadColumns = sourceColumns + `, last_batch_seq, blocked_generation, blocked_seq, blocked_location,
	blocked_reason, blocked_first_failed_at_us, blocked_last_failed_at_us, blocked_attempts, late_rows`

const generationColumns = `source, generation, kind, pin, pin_label, chunks, status, retired_reason,
	created_at_us, swapped_at_us, retired_at_us, applied_seq, chunks_applied,
	times_seq, times_min_us, times_max_us`

func scanSource(sc interface{ Scan(...any) error }) (storekit.SourceRow, error) {
	var (
		r         storekit.SourceRow
		building  sql.NullInt64
		parked    sql.NullString
		requested int64
		first     int64
		last      int64
		attempts  int64
	)
	if err := sc.Scan(&r.Name, &r.Connector, &r.DefinitionHash, &building, &r.Serving, &r.Last,
		&requested, &parked, &r.DeferredFor, &r.RegisteredAt, &r.UpdatedAt, &r.Removed, &r.LastSeq,
		&r.Block.Generation, &r.Block.Seq, &r.Block.Location, &r.Block.Reason, &first, &last, &attempts, &r.LateRows); err != nil {
		return storekit.SourceRow{}, err
	}
	r.Building, r.Parked, r.Requested = building.Int64, parked.String, requested != 0
	r.Block.FirstFailedAt, r.Block.LastFailedAt, r.Block.Attempts = storekit.FromMicros(first), storekit.FromMicros(last), int(attempts)
	return r, nil
}

func scanGeneration(sc interface{ Scan(...any) error }) (state.Generation, error) {
	var (
		g                         state.Generation
		pin                       sql.NullInt64
		kind, status              string
		created, swapped, retired int64
		timesSeq                  int64
		timesMin, timesMax        *int64
	)
	if err := sc.Scan(&g.Source, &g.Generation, &kind, &pin, &g.PinLabel, &g.Chunks, &status,
		&g.RetiredReason, &created, &swapped, &retired, &g.AppliedSeq, &g.ChunksApplied, &timesSeq, &timesMin, &timesMax); err != nil {
		return state.Generation{}, err
	}
	g.Kind, g.Status = state.GenerationKind(kind), state.GenerationStatus(status)
	if pin.Valid {
		v := pin.Int64
		g.Pin = &v
	}
	g.CreatedAt, g.SwappedAt, g.RetiredAt = storekit.FromMicros(created), storekit.FromMicros(swapped), storekit.FromMicros(retired)
	g.Times = storekit.ScanTimes(timesSeq, timesMin, timesMax)
	return g, nil
}

// sourceTx is storekit.SourceTx on a write transaction.
type sourceTx struct{ tx *sql.Tx }

func (t sourceTx) Source(ctx context.Context, name string) (storekit.SourceRow, bool, error) {
	r, err := scanSource(t.tx.QueryRowContext(ctx, `SELECT `+sourceReadColumns+` FROM sources WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return storekit.SourceRow{}, false, nil
	}
	return r, err == nil, err
}

func (t sourceTx) Generation(ctx context.Context, source string, g int64) (state.Generation, bool, error) {
	gen, err := scanGeneration(t.tx.QueryRowContext(ctx,
		`SELECT `+generationColumns+` FROM source_generations WHERE source = ? AND generation = ?`, source, g))
	if errors.Is(err, sql.ErrNoRows) {
		return state.Generation{}, false, nil
	}
	return gen, err == nil, err
}

func nullGen(g int64) any {
	if g == 0 {
		return nil
	}
	return g
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (t sourceTx) PutSource(ctx context.Context, r storekit.SourceRow) error {
	requested := 0
	if r.Requested {
		requested = 1
	}
	_, err := t.tx.ExecContext(ctx, `
		INSERT INTO sources (`+sourceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET
			connector = excluded.connector, definition_hash = excluded.definition_hash,
			building_generation = excluded.building_generation, serving_generation = excluded.serving_generation,
			last_generation = excluded.last_generation, build_requested = excluded.build_requested,
			parked_reason = excluded.parked_reason, deferred_for_generation = excluded.deferred_for_generation,
			registered_at_us = excluded.registered_at_us, updated_at_us = excluded.updated_at_us,
			removed_at_us = excluded.removed_at_us`,
		r.Name, r.Connector, r.DefinitionHash, nullGen(r.Building), r.Serving, r.Last, requested,
		nullText(r.Parked), r.DeferredFor, r.RegisteredAt, r.UpdatedAt, r.Removed)
	return err
}

func (t sourceTx) InsertGeneration(ctx context.Context, g state.Generation) error {
	_, err := t.tx.ExecContext(ctx, `
		INSERT INTO source_generations (`+generationColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		generationArgs(g)...)
	return err
}

func (t sourceTx) PutGeneration(ctx context.Context, g state.Generation) error {
	res, err := t.tx.ExecContext(ctx, `
		UPDATE source_generations SET kind = ?3, pin = ?4, pin_label = ?5, chunks = ?6, status = ?7,
			retired_reason = ?8, created_at_us = ?9, swapped_at_us = ?10, retired_at_us = ?11,
			applied_seq = ?12, chunks_applied = ?13, times_seq = ?14, times_min_us = ?15, times_max_us = ?16
		WHERE source = ?1 AND generation = ?2`,
		generationArgs(g)...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(err, fmt.Errorf("generation %d of source %q does not exist", g.Generation, g.Source))
	}
	return nil
}

// generationArgs are g's columns in generationColumns order.
func generationArgs(g state.Generation) []any {
	timesSeq, timesMin, timesMax := storekit.TimesArgs(g.Times)
	var pin any
	if g.Pin != nil {
		pin = *g.Pin
	}
	return []any{g.Source, g.Generation, string(g.Kind), pin, g.PinLabel, g.Chunks, string(g.Status), g.RetiredReason,
		storekit.Micros(g.CreatedAt), storekit.Micros(g.SwappedAt), storekit.Micros(g.RetiredAt), g.AppliedSeq, g.ChunksApplied,
		timesSeq, timesMin, timesMax}
}

func (t sourceTx) AppendEvents(ctx context.Context, events []state.Event) error {
	out, data, err := prepareEvents(events)
	if err != nil {
		return err
	}
	return insertEvents(ctx, t.tx, out, data)
}

// sourceWrite runs one transition in a write transaction.
func (s *Store) sourceWrite(ctx context.Context, what string, fn func(t sourceTx) error) error {
	if err := s.write(ctx, func(tx *sql.Tx) error { return fn(sourceTx{tx}) }); err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return nil
}

// EnsureSources registers source definitions (see state.SourceStore).
func (s *Store) EnsureSources(ctx context.Context, p state.EnsureSourcesParams) ([]*state.Source, error) {
	var out []*state.Source
	err := s.sourceWrite(ctx, "ensure sources", func(t sourceTx) (err error) {
		out, err = storekit.EnsureSources(ctx, t, p)
		return err
	})
	return out, err
}

// PlanGeneration issues the next generation of a source with no build in
// flight (see state.SourceStore). A refusal with ErrBuildInFlight commits
// its deferral event and nothing else.
func (s *Store) PlanGeneration(ctx context.Context, p state.PlanGenerationParams) (state.Generation, error) {
	var (
		out     state.Generation
		refused error
	)
	err := s.sourceWrite(ctx, fmt.Sprintf("plan a generation of source %q", p.Source), func(t sourceTx) (err error) {
		out, refused, err = storekit.PlanGeneration(ctx, t, p)
		return err
	})
	if err == nil && refused != nil {
		err = fmt.Errorf("sqlite: plan a generation of source %q: %w", p.Source, refused)
	}
	return out, err
}

// PinGeneration pins the building generation (see state.SourceStore).
func (s *Store) PinGeneration(ctx context.Context, p state.PinGenerationParams) (state.Generation, error) {
	var out state.Generation
	err := s.sourceWrite(ctx, fmt.Sprintf("pin generation %d of source %q", p.Generation, p.Source), func(t sourceTx) (err error) {
		out, err = storekit.PinGeneration(ctx, t, p)
		return err
	})
	return out, err
}

// RetireGeneration retires the building generation (see state.SourceStore).
func (s *Store) RetireGeneration(ctx context.Context, p state.RetireGenerationParams) (*state.Source, error) {
	return s.sourceTransition(ctx, fmt.Sprintf("retire generation %d of source %q", p.Generation, p.Source), p.Source,
		func(t sourceTx) (*state.Source, error) { return storekit.RetireGeneration(ctx, t, p) })
}

// RecordSwap records the swap of the building generation (see
// state.SourceStore).
func (s *Store) RecordSwap(ctx context.Context, p state.RecordSwapParams) (*state.Source, error) {
	return s.sourceTransition(ctx, fmt.Sprintf("record the swap of generation %d of source %q", p.Generation, p.Source), p.Source,
		func(t sourceTx) (*state.Source, error) { return storekit.RecordSwap(ctx, t, p) })
}

// RecordApplied moves a generation's applied seq forward (see
// state.SourceStore), under the write lock. It commits on the rec pool,
// like an interval record (see the package comment): the applied seq, the
// chunks applied and the times are the state store's cache of the
// warehouse's markers, written after the warehouse commits; a power loss
// that rolls it back leaves the store behind the warehouse, never ahead,
// and the next ingest pass heals it from the markers.
func (s *Store) RecordApplied(ctx context.Context, p state.RecordAppliedParams) (state.Generation, error) {
	var out state.Generation
	what := fmt.Sprintf("record batch %d applied to generation %d of source %q", p.Seq, p.Generation, p.Source)
	err := s.writeRecord(ctx, func(tx *sql.Tx) (err error) {
		out, err = storekit.RecordApplied(ctx, sourceTx{tx}, p)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}

// RecordBlocked records a batch that failed (see state.SourceStore),
// under the write lock.
func (s *Store) RecordBlocked(ctx context.Context, p state.RecordBlockedParams) (state.SourceBlock, error) {
	var out state.SourceBlock
	err := s.sourceWrite(ctx, fmt.Sprintf("record batch %d of source %q blocked on generation %d", p.Seq, p.Source, p.Generation), func(t sourceTx) (err error) {
		out, err = storekit.RecordBlocked(ctx, t, p)
		return err
	})
	return out, err
}

// RecordSkipped marks a batch skipped and appends its event (see
// state.SourceStore), under the write lock.
func (s *Store) RecordSkipped(ctx context.Context, p state.RecordSkippedParams) (state.Batch, error) {
	var out state.Batch
	err := s.sourceWrite(ctx, fmt.Sprintf("record batch %d of source %q skipped on generation %d", p.Seq, p.Source, p.Generation), func(t sourceTx) (err error) {
		out, err = storekit.RecordSkipped(ctx, t, p)
		return err
	})
	return out, err
}

// AddLateRows adds to a source's late rows (see state.SourceStore),
// under the write lock.
func (s *Store) AddLateRows(ctx context.Context, p state.AddLateRowsParams) (int64, error) {
	var out int64
	err := s.sourceWrite(ctx, fmt.Sprintf("add %d late rows of generation %d of source %q", p.Rows, p.Generation, p.Source), func(t sourceTx) (err error) {
		out, err = storekit.AddLateRows(ctx, t, p)
		return err
	})
	return out, err
}

// RequestBuild requests a build (see state.SourceStore).
func (s *Store) RequestBuild(ctx context.Context, p state.RequestBuildParams) (*state.Source, error) {
	return s.sourceTransition(ctx, fmt.Sprintf("request a build of source %q", p.Source), p.Source,
		func(t sourceTx) (*state.Source, error) { return storekit.RequestBuild(ctx, t, p) })
}

// ParkSource parks a source (see state.SourceStore).
func (s *Store) ParkSource(ctx context.Context, p state.ParkSourceParams) (*state.Source, error) {
	return s.sourceTransition(ctx, fmt.Sprintf("park source %q", p.Source), p.Source,
		func(t sourceTx) (*state.Source, error) { return storekit.ParkSource(ctx, t, p) })
}

// UnparkSource clears a source's park (see state.SourceStore).
func (s *Store) UnparkSource(ctx context.Context, p state.UnparkSourceParams) (*state.Source, error) {
	return s.sourceTransition(ctx, fmt.Sprintf("unpark source %q", p.Source), p.Source,
		func(t sourceTx) (*state.Source, error) { return storekit.UnparkSource(ctx, t, p) })
}

// RemoveSource removes a source, keeping its tombstone (see
// state.SourceStore).
func (s *Store) RemoveSource(ctx context.Context, p state.RemoveSourceParams) (*state.Source, error) {
	return s.sourceTransition(ctx, fmt.Sprintf("remove source %q", p.Source), p.Source,
		func(t sourceTx) (*state.Source, error) { return storekit.RemoveSource(ctx, t, p) })
}

// sourceTransition runs fn in a write transaction and returns the source
// as it committed, with its generations read in the same transaction.
func (s *Store) sourceTransition(ctx context.Context, what, name string, fn func(t sourceTx) (*state.Source, error)) (*state.Source, error) {
	var out *state.Source
	err := s.sourceWrite(ctx, what, func(t sourceTx) error {
		src, err := fn(t)
		if err != nil {
			return err
		}
		gens, err := generationsOf(ctx, t.tx, []string{name})
		if err != nil {
			return err
		}
		src.Generations, out = gens[name], src
		return nil
	})
	return out, err
}

// generationsOf returns the generations of the named sources.
func generationsOf(ctx context.Context, q querier, names []string) (map[string][]state.Generation, error) {
	encoded, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT `+generationColumns+` FROM source_generations
		WHERE source IN (SELECT value FROM json_each(?)) ORDER BY source, generation`, string(encoded))
	if err != nil {
		return nil, fmt.Errorf("reading generations: %w", err)
	}
	defer rows.Close()
	out := map[string][]state.Generation{}
	for rows.Next() {
		g, err := scanGeneration(rows)
		if err != nil {
			return nil, fmt.Errorf("reading generations: %w", err)
		}
		out[g.Source] = append(out[g.Source], g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading generations: %w", err)
	}
	return out, nil
}

// GetSource returns the named source with its generations, or an error
// wrapping state.ErrNotFound.
func (s *Store) GetSource(ctx context.Context, name string) (*state.Source, error) {
	list, err := s.listSources(ctx, state.SourceFilter{Names: []string{name}, IncludeRemoved: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: get source %q: %w", name, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("sqlite: source %q: %w", name, state.ErrNotFound)
	}
	return list[0], nil
}

// ListSources returns the sources matching f, by name, with their
// generations.
func (s *Store) ListSources(ctx context.Context, f state.SourceFilter) ([]*state.Source, error) {
	list, err := s.listSources(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sources: %w", err)
	}
	return list, nil
}

// listSources reads the sources and their generations in one read
// transaction, so the two are consistent.
func (s *Store) listSources(ctx context.Context, f state.SourceFilter) ([]*state.Source, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to keep
	var where []string
	var args []any
	if f.Names != nil {
		encoded, err := json.Marshal(f.Names)
		if err != nil {
			return nil, err
		}
		where = append(where, `name IN (SELECT value FROM json_each(?))`)
		args = append(args, string(encoded))
	}
	if !f.IncludeRemoved {
		where = append(where, `removed_at_us = 0`)
	}
	query := `SELECT ` + sourceReadColumns + ` FROM sources`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := tx.QueryContext(ctx, query+` ORDER BY name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*state.Source
	var names []string
	for rows.Next() {
		r, err := scanSource(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Record())
		names = append(names, r.Name)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	gens, err := generationsOf(ctx, tx, names)
	if err != nil {
		return nil, err
	}
	for _, src := range out {
		src.Generations = gens[src.Name]
	}
	return out, nil
}

const batchColumns = `source, seq, pos_from, pos_to, kind, replace_run, location, row_count,
	min_time_us, max_time_us, staged_at_us, skipped_at_us`

func scanBatch(sc interface{ Scan(...any) error }) (state.Batch, error) {
	var (
		b                  state.Batch
		kind               string
		minT, maxT, staged int64
		skipped            int64
	)
	if err := sc.Scan(&b.Source, &b.Seq, &b.From, &b.To, &kind, &b.ReplaceRun, &b.Location, &b.Rows,
		&minT, &maxT, &staged, &skipped); err != nil {
		return state.Batch{}, err
	}
	b.Kind = state.BatchKind(kind)
	b.MinTime, b.MaxTime, b.StagedAt = storekit.FromMicros(minT), storekit.FromMicros(maxT), storekit.FromMicros(staged)
	b.SkippedAt = storekit.FromMicros(skipped)
	return b, nil
}

func (t sourceTx) Queue(ctx context.Context, source string) (int64, int64, bool, error) {
	var seq, to, removed int64
	err := t.tx.QueryRowContext(ctx,
		`SELECT last_batch_seq, last_batch_to, removed_at_us FROM sources WHERE name = ?`, source).Scan(&seq, &to, &removed)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return seq, to, err == nil && removed == 0, err
}

func (t sourceTx) BatchAt(ctx context.Context, source string, from int64) (state.Batch, bool, error) {
	b, err := scanBatch(t.tx.QueryRowContext(ctx,
		`SELECT `+batchColumns+` FROM source_batches WHERE source = ? AND pos_from = ?`, source, from))
	if errors.Is(err, sql.ErrNoRows) {
		return state.Batch{}, false, nil
	}
	return b, err == nil, err
}

func (t sourceTx) InsertBatch(ctx context.Context, b state.Batch) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO source_batches (`+batchColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.Source, b.Seq, b.From, b.To, string(b.Kind), b.ReplaceRun, b.Location, b.Rows,
		storekit.Micros(b.MinTime), storekit.Micros(b.MaxTime), storekit.Micros(b.StagedAt), storekit.Micros(b.SkippedAt))
	return err
}

func (t sourceTx) SetQueue(ctx context.Context, source string, lastSeq, lastTo int64) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE sources SET last_batch_seq = ?, last_batch_to = ? WHERE name = ?`, lastSeq, lastTo, source)
	return err
}

// StageBatches appends batches to a source's queue (see state.BatchQueue).
func (s *Store) StageBatches(ctx context.Context, p state.StageBatchesParams) ([]state.Batch, error) {
	var out []state.Batch
	err := s.sourceWrite(ctx, fmt.Sprintf("stage %d batches of source %q", len(p.Batches), p.Source), func(t sourceTx) (err error) {
		out, err = storekit.StageBatches(ctx, t, p)
		return err
	})
	return out, err
}

// ListBatches returns a source's batches after p.AfterSeq, in Seq order.
func (s *Store) ListBatches(ctx context.Context, p state.ListBatchesParams) ([]state.Batch, error) {
	if p.Limit < 0 {
		return nil, fmt.Errorf("sqlite: list batches of source %q: negative limit %d", p.Source, p.Limit)
	}
	query := `SELECT ` + batchColumns + ` FROM source_batches WHERE source = ? AND seq > ? ORDER BY seq`
	args := []any{p.Source, p.AfterSeq}
	if p.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, p.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list batches of source %q: %w", p.Source, err)
	}
	defer rows.Close()
	var out []state.Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list batches of source %q: %w", p.Source, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list batches of source %q: %w", p.Source, err)
	}
	return out, nil
}

// PruneBatches deletes a source's batches below p.BelowSeq.
func (s *Store) PruneBatches(ctx context.Context, p state.PruneBatchesParams) (int64, error) {
	var n int64
	err := s.sourceWrite(ctx, fmt.Sprintf("prune the batches of source %q", p.Source), func(t sourceTx) error {
		res, err := t.tx.ExecContext(ctx, `DELETE FROM source_batches WHERE source = ? AND seq < ?`, p.Source, p.BelowSeq)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

func (t sourceTx) DropBatches(ctx context.Context, source string) error {
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM source_batches WHERE source = ?`, source); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE sources SET last_batch_to = 0 WHERE name = ?`, source)
	return err
}

func (t sourceTx) PutBlock(ctx context.Context, source string, b state.SourceBlock) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE sources SET blocked_generation = ?, blocked_seq = ?, blocked_location = ?,
		blocked_reason = ?, blocked_first_failed_at_us = ?, blocked_last_failed_at_us = ?, blocked_attempts = ?
		WHERE name = ?`, b.Generation, b.Seq, b.Location, b.Reason, storekit.Micros(b.FirstFailedAt), storekit.Micros(b.LastFailedAt),
		b.Attempts, source)
	return err
}

func (t sourceTx) BatchSeq(ctx context.Context, source string, seq int64) (state.Batch, bool, error) {
	b, err := scanBatch(t.tx.QueryRowContext(ctx,
		`SELECT `+batchColumns+` FROM source_batches WHERE source = ? AND seq = ?`, source, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return state.Batch{}, false, nil
	}
	return b, err == nil, err
}

func (t sourceTx) PutSkipped(ctx context.Context, source string, seq int64, at time.Time) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE source_batches SET skipped_at_us = ? WHERE source = ? AND seq = ?`,
		storekit.Micros(at), source, seq)
	return err
}

func (t sourceTx) PutLateRows(ctx context.Context, source string, total int64) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE sources SET late_rows = ? WHERE name = ?`, total, source)
	return err
}
