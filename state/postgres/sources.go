package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// The sources state machine (state.SourceStore). Every transition runs the
// shared compare-and-swap of storekit in one READ COMMITTED transaction
// that first locks the source's row FOR UPDATE: a concurrent transition of
// the same source waits for the lock and then reads what the first
// committed, so of concurrent planners exactly one sees no build in flight.
// EnsureSources, the only creator of rows, also holds a transaction-scoped
// advisory lock, so two registrations of a new name cannot both insert it.
// Locks are taken in the order: sources advisory lock, source rows (by
// name), the event lock.

// sourcesLockID is the key of the advisory lock EnsureSources holds
// ("gapless" followed by 0x07).
const sourcesLockID int64 = 0x676170_6c657373_07

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

func scanSource(row pgx.Row) (storekit.SourceRow, error) {
	var (
		r        storekit.SourceRow
		building *int64
		parked   *string
		first    int64
		last     int64
		attempts int32
	)
	if err := row.Scan(&r.Name, &r.Connector, &r.DefinitionHash, &building, &r.Serving, &r.Last,
		&r.Requested, &parked, &r.DeferredFor, &r.RegisteredAt, &r.UpdatedAt, &r.Removed, &r.LastSeq,
		&r.Block.Generation, &r.Block.Seq, &r.Block.Location, &r.Block.Reason, &first, &last, &attempts, &r.LateRows); err != nil {
		return storekit.SourceRow{}, err
	}
	if building != nil {
		r.Building = *building
	}
	if parked != nil {
		r.Parked = *parked
	}
	r.Block.FirstFailedAt, r.Block.LastFailedAt, r.Block.Attempts = storekit.FromMicros(first), storekit.FromMicros(last), int(attempts)
	return r, nil
}

func scanGeneration(row pgx.Row) (state.Generation, error) {
	var (
		g                         state.Generation
		kind, status              string
		chunks, chunksApplied     int32
		created, swapped, retired int64
		timesSeq                  int64
		timesMin, timesMax        *int64
	)
	if err := row.Scan(&g.Source, &g.Generation, &kind, &g.Pin, &g.PinLabel, &chunks, &status,
		&g.RetiredReason, &created, &swapped, &retired, &g.AppliedSeq, &chunksApplied, &timesSeq, &timesMin, &timesMax); err != nil {
		return state.Generation{}, err
	}
	g.Kind, g.Status, g.Chunks, g.ChunksApplied = state.GenerationKind(kind), state.GenerationStatus(status), int(chunks), int(chunksApplied)
	g.CreatedAt, g.SwappedAt, g.RetiredAt = storekit.FromMicros(created), storekit.FromMicros(swapped), storekit.FromMicros(retired)
	g.Times = storekit.ScanTimes(timesSeq, timesMin, timesMax)
	return g, nil
}

// sourceTx is storekit.SourceTx on a transaction.
type sourceTx struct {
	tx pgx.Tx
	// afterRead is the store's afterSourceRead test hook.
	afterRead func()
}

func (t sourceTx) Source(ctx context.Context, name string) (storekit.SourceRow, bool, error) {
	r, err := scanSource(t.tx.QueryRow(ctx, `SELECT `+sourceReadColumns+` FROM sources WHERE name = $1 FOR UPDATE`, name))
	if t.afterRead != nil {
		t.afterRead()
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return storekit.SourceRow{}, false, nil
	}
	return r, err == nil, err
}

func (t sourceTx) Generation(ctx context.Context, source string, g int64) (state.Generation, bool, error) {
	gen, err := scanGeneration(t.tx.QueryRow(ctx,
		`SELECT `+generationColumns+` FROM source_generations WHERE source = $1 AND generation = $2`, source, g))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Generation{}, false, nil
	}
	return gen, err == nil, err
}

func optGen(g int64) *int64 {
	if g == 0 {
		return nil
	}
	return &g
}

func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (t sourceTx) PutSource(ctx context.Context, r storekit.SourceRow) error {
	_, err := t.tx.Exec(ctx, `
		INSERT INTO sources (`+sourceColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (name) DO UPDATE SET
			connector = excluded.connector, definition_hash = excluded.definition_hash,
			building_generation = excluded.building_generation, serving_generation = excluded.serving_generation,
			last_generation = excluded.last_generation, build_requested = excluded.build_requested,
			parked_reason = excluded.parked_reason, deferred_for_generation = excluded.deferred_for_generation,
			registered_at_us = excluded.registered_at_us, updated_at_us = excluded.updated_at_us,
			removed_at_us = excluded.removed_at_us`,
		r.Name, r.Connector, r.DefinitionHash, optGen(r.Building), r.Serving, r.Last, r.Requested,
		optText(r.Parked), r.DeferredFor, r.RegisteredAt, r.UpdatedAt, r.Removed)
	return err
}

func (t sourceTx) InsertGeneration(ctx context.Context, g state.Generation) error {
	_, err := t.tx.Exec(ctx, `
		INSERT INTO source_generations (`+generationColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		generationArgs(g)...)
	return err
}

func (t sourceTx) PutGeneration(ctx context.Context, g state.Generation) error {
	tag, err := t.tx.Exec(ctx, `
		UPDATE source_generations SET kind = $3, pin = $4, pin_label = $5, chunks = $6, status = $7,
			retired_reason = $8, created_at_us = $9, swapped_at_us = $10, retired_at_us = $11,
			applied_seq = $12, chunks_applied = $13, times_seq = $14, times_min_us = $15, times_max_us = $16
		WHERE source = $1 AND generation = $2`,
		generationArgs(g)...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("generation %d of source %q does not exist", g.Generation, g.Source)
	}
	return nil
}

// generationArgs are g's columns in generationColumns order.
func generationArgs(g state.Generation) []any {
	timesSeq, timesMin, timesMax := storekit.TimesArgs(g.Times)
	return []any{g.Source, g.Generation, string(g.Kind), g.Pin, g.PinLabel, int32(g.Chunks), string(g.Status), g.RetiredReason,
		storekit.Micros(g.CreatedAt), storekit.Micros(g.SwappedAt), storekit.Micros(g.RetiredAt), g.AppliedSeq, int32(g.ChunksApplied),
		timesSeq, timesMin, timesMax}
}

func (t sourceTx) AppendEvents(ctx context.Context, events []state.Event) error {
	encoded, err := encodeEvents(events)
	if err != nil {
		return err
	}
	_, err = encoded.insert(ctx, t.tx)
	return err
}

// sourceWrite runs one transition in a transaction.
func (s *Store) sourceWrite(ctx context.Context, what string, fn func(t sourceTx) error) error {
	if err := s.inTx(ctx, func(tx pgx.Tx) error { return fn(sourceTx{tx: tx, afterRead: s.afterSourceRead}) }); err != nil {
		return fmt.Errorf("postgres state: %s: %w", what, err)
	}
	return nil
}

// EnsureSources registers source definitions (see state.SourceStore).
func (s *Store) EnsureSources(ctx context.Context, p state.EnsureSourcesParams) ([]*state.Source, error) {
	var out []*state.Source
	err := s.sourceWrite(ctx, "ensure sources", func(t sourceTx) (err error) {
		if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sourcesLockID); err != nil {
			return fmt.Errorf("taking the sources lock: %w", err)
		}
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
		err = fmt.Errorf("postgres state: plan a generation of source %q: %w", p.Source, refused)
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
// state.SourceStore): the source's row is locked FOR UPDATE first.
func (s *Store) RecordApplied(ctx context.Context, p state.RecordAppliedParams) (state.Generation, error) {
	var out state.Generation
	err := s.sourceWrite(ctx, fmt.Sprintf("record batch %d applied to generation %d of source %q", p.Seq, p.Generation, p.Source), func(t sourceTx) (err error) {
		out, err = storekit.RecordApplied(ctx, t, p)
		return err
	})
	return out, err
}

// RecordBlocked records a batch that failed (see state.SourceStore),
// the source's row locked FOR UPDATE first.
func (s *Store) RecordBlocked(ctx context.Context, p state.RecordBlockedParams) (state.SourceBlock, error) {
	var out state.SourceBlock
	err := s.sourceWrite(ctx, fmt.Sprintf("record batch %d of source %q blocked on generation %d", p.Seq, p.Source, p.Generation), func(t sourceTx) (err error) {
		out, err = storekit.RecordBlocked(ctx, t, p)
		return err
	})
	return out, err
}

// RecordSkipped marks a batch skipped and appends its event (see
// state.SourceStore), under the source's row lock.
func (s *Store) RecordSkipped(ctx context.Context, p state.RecordSkippedParams) (state.Batch, error) {
	var out state.Batch
	err := s.sourceWrite(ctx, fmt.Sprintf("record batch %d of source %q skipped on generation %d", p.Seq, p.Source, p.Generation), func(t sourceTx) (err error) {
		out, err = storekit.RecordSkipped(ctx, t, p)
		return err
	})
	return out, err
}

// AddLateRows adds to a source's late rows (see state.SourceStore),
// the source's row locked FOR UPDATE first.
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

// sourceTransition runs fn in a transaction and returns the source as it
// committed, with its generations read in the same transaction (under the
// source's row lock).
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

// generationsOf returns the generations of the named sources, by number.
func generationsOf(ctx context.Context, q querier, names []string) (map[string][]state.Generation, error) {
	rows, err := q.Query(ctx, `SELECT `+generationColumns+` FROM source_generations
		WHERE source = ANY($1) ORDER BY source, generation`, names)
	if err != nil {
		return nil, fmt.Errorf("reading generations: %w", err)
	}
	gens, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (state.Generation, error) { return scanGeneration(r) })
	if err != nil {
		return nil, fmt.Errorf("reading generations: %w", err)
	}
	out := map[string][]state.Generation{}
	for _, g := range gens {
		out[g.Source] = append(out[g.Source], g)
	}
	return out, nil
}

// GetSource returns the named source with its generations, or an error
// wrapping state.ErrNotFound.
func (s *Store) GetSource(ctx context.Context, name string) (*state.Source, error) {
	list, err := s.listSources(ctx, state.SourceFilter{Names: []string{name}, IncludeRemoved: true})
	if err != nil {
		return nil, fmt.Errorf("postgres state: get source %q: %w", name, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("postgres state: source %q: %w", name, state.ErrNotFound)
	}
	return list[0], nil
}

// ListSources returns the sources matching f, by name, with their
// generations.
func (s *Store) ListSources(ctx context.Context, f state.SourceFilter) ([]*state.Source, error) {
	list, err := s.listSources(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list sources: %w", err)
	}
	return list, nil
}

// listSources reads the sources and their generations in one REPEATABLE
// READ transaction, so the two are consistent.
func (s *Store) listSources(ctx context.Context, f state.SourceFilter) ([]*state.Source, error) {
	var out []*state.Source
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+sourceReadColumns+` FROM sources
			WHERE ($1::text[] IS NULL OR name = ANY($1)) AND ($2 OR removed_at_us = 0)
			ORDER BY name`, f.Names, f.IncludeRemoved)
		if err != nil {
			return err
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storekit.SourceRow, error) { return scanSource(r) })
		if err != nil {
			return err
		}
		names := make([]string, len(list))
		out = make([]*state.Source, len(list))
		for i, r := range list {
			names[i], out[i] = r.Name, r.Record()
		}
		if len(list) == 0 {
			return nil
		}
		gens, err := generationsOf(ctx, tx, names)
		if err != nil {
			return err
		}
		for _, src := range out {
			src.Generations = gens[src.Name]
		}
		return nil
	})
	return out, err
}

const batchColumns = `source, seq, pos_from, pos_to, kind, replace_run, location, row_count,
	min_time_us, max_time_us, staged_at_us, skipped_at_us`

func scanBatch(row pgx.Row) (state.Batch, error) {
	var (
		b                  state.Batch
		kind               string
		minT, maxT, staged int64
		skipped            int64
	)
	if err := row.Scan(&b.Source, &b.Seq, &b.From, &b.To, &kind, &b.ReplaceRun, &b.Location, &b.Rows,
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
	err := t.tx.QueryRow(ctx,
		`SELECT last_batch_seq, last_batch_to, removed_at_us FROM sources WHERE name = $1 FOR UPDATE`, source).Scan(&seq, &to, &removed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, nil
	}
	return seq, to, err == nil && removed == 0, err
}

func (t sourceTx) BatchAt(ctx context.Context, source string, from int64) (state.Batch, bool, error) {
	b, err := scanBatch(t.tx.QueryRow(ctx,
		`SELECT `+batchColumns+` FROM source_batches WHERE source = $1 AND pos_from = $2`, source, from))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Batch{}, false, nil
	}
	return b, err == nil, err
}

func (t sourceTx) InsertBatch(ctx context.Context, b state.Batch) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO source_batches (`+batchColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		b.Source, b.Seq, b.From, b.To, string(b.Kind), b.ReplaceRun, b.Location, b.Rows,
		storekit.Micros(b.MinTime), storekit.Micros(b.MaxTime), storekit.Micros(b.StagedAt), storekit.Micros(b.SkippedAt))
	return err
}

func (t sourceTx) SetQueue(ctx context.Context, source string, lastSeq, lastTo int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE sources SET last_batch_seq = $1, last_batch_to = $2 WHERE name = $3`, lastSeq, lastTo, source)
	return err
}

// StageBatches appends batches to a source's queue (see state.BatchQueue),
// under the source's row lock, so stagers of one source serialise.
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
		return nil, fmt.Errorf("postgres state: list batches of source %q: negative limit %d", p.Source, p.Limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+batchColumns+` FROM source_batches
		WHERE source = $1 AND seq > $2 ORDER BY seq LIMIT NULLIF($3, 0)`, p.Source, p.AfterSeq, int64(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("postgres state: list batches of source %q: %w", p.Source, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (state.Batch, error) { return scanBatch(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres state: list batches of source %q: %w", p.Source, err)
	}
	return out, nil
}

// PruneBatches deletes a source's batches below p.BelowSeq.
func (s *Store) PruneBatches(ctx context.Context, p state.PruneBatchesParams) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM source_batches WHERE source = $1 AND seq < $2`, p.Source, p.BelowSeq)
	if err != nil {
		return 0, fmt.Errorf("postgres state: prune the batches of source %q: %w", p.Source, err)
	}
	return tag.RowsAffected(), nil
}

func (t sourceTx) DropBatches(ctx context.Context, source string) error {
	if _, err := t.tx.Exec(ctx, `DELETE FROM source_batches WHERE source = $1`, source); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `UPDATE sources SET last_batch_to = 0 WHERE name = $1`, source)
	return err
}

func (t sourceTx) PutBlock(ctx context.Context, source string, b state.SourceBlock) error {
	_, err := t.tx.Exec(ctx, `UPDATE sources SET blocked_generation = $1, blocked_seq = $2, blocked_location = $3,
		blocked_reason = $4, blocked_first_failed_at_us = $5, blocked_last_failed_at_us = $6, blocked_attempts = $7
		WHERE name = $8`, b.Generation, b.Seq, b.Location, b.Reason, storekit.Micros(b.FirstFailedAt), storekit.Micros(b.LastFailedAt),
		int32(b.Attempts), source)
	return err
}

func (t sourceTx) BatchSeq(ctx context.Context, source string, seq int64) (state.Batch, bool, error) {
	b, err := scanBatch(t.tx.QueryRow(ctx,
		`SELECT `+batchColumns+` FROM source_batches WHERE source = $1 AND seq = $2`, source, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Batch{}, false, nil
	}
	return b, err == nil, err
}

func (t sourceTx) PutSkipped(ctx context.Context, source string, seq int64, at time.Time) error {
	_, err := t.tx.Exec(ctx, `UPDATE source_batches SET skipped_at_us = $1 WHERE source = $2 AND seq = $3`,
		storekit.Micros(at), source, seq)
	return err
}

func (t sourceTx) PutLateRows(ctx context.Context, source string, total int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE sources SET late_rows = $1 WHERE name = $2`, total, source)
	return err
}
