package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// The code-host store (state.CodeHostStore). Every transition runs the
// shared compare-and-swap of storekit inside one synced BEGIN IMMEDIATE
// transaction: the write lock is held from the read of the row to the
// commit, so what a transition checks is what it writes against, for every
// writer of the file in any process. The schema's partial unique index
// deploy_attempts_one_active backs "one running attempt per environment".
//
// Webhook deliveries are written as interval records are (writeRecord:
// synchronous as Sync says, NORMAL by default), about fifteen times faster
// than a synced write: the intake records every delivery. A power loss may
// forget the last of them, which only lets a replay of that delivery
// through again; its jobs are idempotent and every domain write they make
// is a compare-and-swap, so nothing regresses. Every other code-host write
// is synced.

// RecordDelivery inserts a webhook delivery; a replayed id returns
// fresh=false and writes nothing (INSERT ... ON CONFLICT DO NOTHING).
func (s *Store) RecordDelivery(ctx context.Context, p state.RecordDeliveryParams) (bool, error) {
	if err := storekit.CheckRecordDelivery(p); err != nil {
		return false, fmt.Errorf("sqlite: record delivery: %w", err)
	}
	var fresh bool
	err := s.writeRecord(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO webhook_deliveries (id, event, action, repo, received_at_us) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			p.ID, p.Event, p.Action, p.Repo, storekit.Micros(p.Now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		fresh = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: record delivery %q: %w", p.ID, err)
	}
	return fresh, nil
}

// FinishDelivery records a delivery's outcome; the last write wins.
func (s *Store) FinishDelivery(ctx context.Context, p state.FinishDeliveryParams) error {
	if err := storekit.CheckFinishDelivery(p); err != nil {
		return fmt.Errorf("sqlite: finish delivery: %w", err)
	}
	err := s.writeRecord(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE webhook_deliveries SET status = ?, error = ?, processed_at_us = ? WHERE id = ?`,
			p.Status, p.Error, storekit.Micros(p.Now), p.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("no such delivery: %w", state.ErrNotFound))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: finish delivery %q: %w", p.ID, err)
	}
	return nil
}

// ListDeliveries returns deliveries newest first.
func (s *Store) ListDeliveries(ctx context.Context, p state.ListDeliveriesParams) ([]state.Delivery, error) {
	limit, err := storekit.ListLimit(p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	var (
		where = []string{"1 = 1"}
		args  []any
	)
	for _, f := range []struct{ col, v string }{{"repo", p.Repo}, {"event", p.Event}, {"status", p.Status}} {
		if f.v != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT id, event, action, repo, status, error, received_at_us, processed_at_us
		FROM webhook_deliveries WHERE `+strings.Join(where, " AND ")+`
		ORDER BY received_at_us DESC, id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	defer rows.Close()
	var out []state.Delivery
	for rows.Next() {
		var (
			d                   state.Delivery
			received, processed int64
		)
		if err := rows.Scan(&d.ID, &d.Event, &d.Action, &d.Repo, &d.Status, &d.Error, &received, &processed); err != nil {
			return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
		}
		d.ReceivedAt, d.ProcessedAt = storekit.FromMicros(received), storekit.FromMicros(processed)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	return out, nil
}

// codeHostTx is storekit.CodeHostTx on a write transaction (which holds
// the file's write lock: every read is locked).
type codeHostTx struct{ tx *sql.Tx }

// codeHost runs fn, a code-host transition, in one write transaction.
func (s *Store) codeHost(ctx context.Context, fn func(tx codeHostTx) error) error {
	return s.write(ctx, func(tx *sql.Tx) error { return fn(codeHostTx{tx}) })
}

// inserted reports whether an INSERT ... ON CONFLICT DO NOTHING inserted.
func inserted(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// updatedOne requires an UPDATE to have changed exactly one row.
func updatedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("updated %d rows, not 1", n)
	}
	return nil
}

const prCheckColumns = `repo, number, env, head_sha, base_sha, merge_sha, pr_environment, plan_id,
	planned_generation, verdict, summary, detail, closed, revision, updated_at_us`

func scanPRCheck(sc interface{ Scan(...any) error }) (state.PRCheck, error) {
	var (
		c       state.PRCheck
		detail  *string
		closed  int64
		updated int64
	)
	if err := sc.Scan(&c.Repo, &c.Number, &c.Env, &c.HeadSHA, &c.BaseSHA, &c.MergeSHA, &c.PREnvironment, &c.PlanID,
		&c.PlannedGeneration, &c.Verdict, &c.Summary, &detail, &closed, &c.Revision, &updated); err != nil {
		return state.PRCheck{}, err
	}
	c.Detail, c.Closed, c.UpdatedAt = rawJSON(detail), closed != 0, storekit.FromMicros(updated)
	return c, nil
}

func prCheckArgs(c state.PRCheck) []any {
	var detail any
	if len(c.Detail) > 0 {
		detail = string(c.Detail)
	}
	return []any{c.Repo, c.Number, c.Env, c.HeadSHA, c.BaseSHA, c.MergeSHA, c.PREnvironment, c.PlanID,
		c.PlannedGeneration, c.Verdict, c.Summary, detail, boolInt(c.Closed), c.Revision, storekit.Micros(c.UpdatedAt)}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t codeHostTx) PRCheck(ctx context.Context, repo string, number int, env string) (state.PRCheck, bool, error) {
	c, err := scanPRCheck(t.tx.QueryRowContext(ctx,
		`SELECT `+prCheckColumns+` FROM pr_checks WHERE repo = ? AND number = ? AND env = ?`, repo, number, env))
	if errors.Is(err, sql.ErrNoRows) {
		return state.PRCheck{}, false, nil
	}
	return c, err == nil, err
}

func (t codeHostTx) InsertPRCheck(ctx context.Context, c state.PRCheck) (bool, error) {
	return inserted(t.tx.ExecContext(ctx, `
		INSERT INTO pr_checks (`+prCheckColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, number, env) DO NOTHING`, prCheckArgs(c)...))
}

func (t codeHostTx) UpdatePRCheck(ctx context.Context, c state.PRCheck) error {
	return updatedOne(t.tx.ExecContext(ctx, `
		UPDATE pr_checks SET head_sha = ?4, base_sha = ?5, merge_sha = ?6, pr_environment = ?7, plan_id = ?8,
			planned_generation = ?9, verdict = ?10, summary = ?11, detail = ?12, closed = ?13, revision = ?14,
			updated_at_us = ?15
		WHERE repo = ?1 AND number = ?2 AND env = ?3`, prCheckArgs(c)...))
}

const checkRenderColumns = `repo, number, head_sha, name, desired, desired_revision, rendered_revision,
	check_run_id, last_error, updated_at_us, rendered_at_us`

func scanCheckRender(sc interface{ Scan(...any) error }) (state.CheckRender, error) {
	var (
		r                 state.CheckRender
		desired           string
		updated, rendered int64
	)
	if err := sc.Scan(&r.Key.Repo, &r.Key.Number, &r.Key.HeadSHA, &r.Key.Name, &desired, &r.DesiredRevision,
		&r.RenderedRevision, &r.CheckRunID, &r.LastError, &updated, &rendered); err != nil {
		return state.CheckRender{}, err
	}
	d, err := storekit.ParseDesired(desired)
	if err != nil {
		return state.CheckRender{}, err
	}
	r.Desired, r.UpdatedAt, r.RenderedAt = d, storekit.FromMicros(updated), storekit.FromMicros(rendered)
	return r, nil
}

func checkRenderArgs(r state.CheckRender) []any {
	return []any{r.Key.Repo, r.Key.Number, r.Key.HeadSHA, r.Key.Name, storekit.DesiredJSON(r.Desired), r.DesiredRevision,
		r.RenderedRevision, r.CheckRunID, r.LastError, storekit.Micros(r.UpdatedAt), storekit.Micros(r.RenderedAt)}
}

func (t codeHostTx) CheckRender(ctx context.Context, k state.CheckKey) (state.CheckRender, bool, error) {
	r, err := scanCheckRender(t.tx.QueryRowContext(ctx, `SELECT `+checkRenderColumns+` FROM check_renders
		WHERE repo = ? AND number = ? AND head_sha = ? AND name = ?`, k.Repo, k.Number, k.HeadSHA, k.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return state.CheckRender{}, false, nil
	}
	return r, err == nil, err
}

func (t codeHostTx) InsertCheckRender(ctx context.Context, r state.CheckRender) (bool, error) {
	return inserted(t.tx.ExecContext(ctx, `
		INSERT INTO check_renders (`+checkRenderColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, number, head_sha, name) DO NOTHING`, checkRenderArgs(r)...))
}

func (t codeHostTx) UpdateCheckRender(ctx context.Context, r state.CheckRender) error {
	return updatedOne(t.tx.ExecContext(ctx, `
		UPDATE check_renders SET desired = ?5, desired_revision = ?6, rendered_revision = ?7, check_run_id = ?8,
			last_error = ?9, updated_at_us = ?10, rendered_at_us = ?11
		WHERE repo = ?1 AND number = ?2 AND head_sha = ?3 AND name = ?4`, checkRenderArgs(r)...))
}

const commentColumns = `repo, number, marker, owner, token, claimed_at_us, expires_at_us, comment_id, posted_at_us`

func scanComment(sc interface{ Scan(...any) error }) (state.CommentClaim, error) {
	var (
		c                        state.CommentClaim
		claimed, expires, posted int64
	)
	if err := sc.Scan(&c.Repo, &c.Number, &c.Marker, &c.Owner, &c.Token, &claimed, &expires, &c.CommentID, &posted); err != nil {
		return state.CommentClaim{}, err
	}
	c.ClaimedAt, c.ExpiresAt, c.PostedAt = storekit.FromMicros(claimed), storekit.FromMicros(expires), storekit.FromMicros(posted)
	c.Posted = c.CommentID > 0
	return c, nil
}

func commentArgs(c state.CommentClaim) []any {
	return []any{c.Repo, c.Number, c.Marker, c.Owner, c.Token, storekit.Micros(c.ClaimedAt), storekit.Micros(c.ExpiresAt),
		c.CommentID, storekit.Micros(c.PostedAt)}
}

func (t codeHostTx) Comment(ctx context.Context, repo string, number int, marker string) (state.CommentClaim, bool, error) {
	c, err := scanComment(t.tx.QueryRowContext(ctx,
		`SELECT `+commentColumns+` FROM pr_comments WHERE repo = ? AND number = ? AND marker = ?`, repo, number, marker))
	if errors.Is(err, sql.ErrNoRows) {
		return state.CommentClaim{}, false, nil
	}
	return c, err == nil, err
}

func (t codeHostTx) InsertComment(ctx context.Context, c state.CommentClaim) (bool, error) {
	return inserted(t.tx.ExecContext(ctx, `
		INSERT INTO pr_comments (`+commentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, number, marker) DO NOTHING`, commentArgs(c)...))
}

func (t codeHostTx) UpdateComment(ctx context.Context, c state.CommentClaim) error {
	return updatedOne(t.tx.ExecContext(ctx, `
		UPDATE pr_comments SET owner = ?4, token = ?5, claimed_at_us = ?6, expires_at_us = ?7, comment_id = ?8,
			posted_at_us = ?9
		WHERE repo = ?1 AND number = ?2 AND marker = ?3`, commentArgs(c)...))
}

const deployColumns = `id, env, repo, number, head_sha, origin, trigger_kind, requested_by, state, owner,
	lease_token, lease_expires_at_us, plan_id, result_generation, error, merge_sha, merge_error,
	merge_recorded_at_us, created_at_us, started_at_us, finished_at_us, updated_at_us,
	mode, base_generation, holds_recorded_at_us, holds_rendered_at_us, promoted_at_us, settled_at_us, settled_by`

func scanDeploy(sc interface{ Scan(...any) error }) (state.DeployAttempt, error) {
	var (
		a                                        state.DeployAttempt
		expires, merged, created, started, ended int64
		updated, recorded, rendered, promoted    int64
		settled                                  int64
	)
	if err := sc.Scan(&a.ID, &a.Env, &a.Repo, &a.Number, &a.HeadSHA, &a.Origin, &a.Trigger, &a.RequestedBy, &a.State,
		&a.Owner, &a.LeaseToken, &expires, &a.PlanID, &a.ResultGeneration, &a.Error, &a.MergeSHA, &a.MergeError,
		&merged, &created, &started, &ended, &updated,
		&a.Mode, &a.BaseGeneration, &recorded, &rendered, &promoted, &settled, &a.SettledBy); err != nil {
		return state.DeployAttempt{}, err
	}
	a.LeaseExpiresAt, a.MergeRecordedAt = storekit.FromMicros(expires), storekit.FromMicros(merged)
	a.CreatedAt, a.StartedAt = storekit.FromMicros(created), storekit.FromMicros(started)
	a.FinishedAt, a.UpdatedAt = storekit.FromMicros(ended), storekit.FromMicros(updated)
	a.HoldsRecordedAt, a.HoldsRenderedAt = storekit.FromMicros(recorded), storekit.FromMicros(rendered)
	a.PromotedAt, a.SettledAt = storekit.FromMicros(promoted), storekit.FromMicros(settled)
	return a, nil
}

func deployArgs(a state.DeployAttempt) []any {
	return []any{a.ID, a.Env, a.Repo, a.Number, a.HeadSHA, a.Origin, a.Trigger, a.RequestedBy, a.State, a.Owner,
		a.LeaseToken, storekit.Micros(a.LeaseExpiresAt), a.PlanID, a.ResultGeneration, a.Error, a.MergeSHA, a.MergeError,
		storekit.Micros(a.MergeRecordedAt), storekit.Micros(a.CreatedAt), storekit.Micros(a.StartedAt),
		storekit.Micros(a.FinishedAt), storekit.Micros(a.UpdatedAt),
		a.Mode, a.BaseGeneration, storekit.Micros(a.HoldsRecordedAt), storekit.Micros(a.HoldsRenderedAt),
		storekit.Micros(a.PromotedAt), storekit.Micros(a.SettledAt), a.SettledBy}
}

func (t codeHostTx) Deploy(ctx context.Context, id string) (state.DeployAttempt, bool, error) {
	a, err := scanDeploy(t.tx.QueryRowContext(ctx, `SELECT `+deployColumns+` FROM deploy_attempts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return state.DeployAttempt{}, false, nil
	}
	return a, err == nil, err
}

func (t codeHostTx) InsertDeploy(ctx context.Context, a state.DeployAttempt) (bool, error) {
	return inserted(t.tx.ExecContext(ctx, `
		INSERT INTO deploy_attempts (`+deployColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, deployArgs(a)...))
}

func (t codeHostTx) UpdateDeploy(ctx context.Context, a state.DeployAttempt) error {
	err := updatedOne(t.tx.ExecContext(ctx, `
		UPDATE deploy_attempts SET env = ?2, repo = ?3, number = ?4, head_sha = ?5, origin = ?6, trigger_kind = ?7,
			requested_by = ?8, state = ?9, owner = ?10, lease_token = ?11, lease_expires_at_us = ?12, plan_id = ?13,
			result_generation = ?14, error = ?15, merge_sha = ?16, merge_error = ?17, merge_recorded_at_us = ?18,
			created_at_us = ?19, started_at_us = ?20, finished_at_us = ?21, updated_at_us = ?22,
			mode = ?23, base_generation = ?24, holds_recorded_at_us = ?25, holds_rendered_at_us = ?26,
			promoted_at_us = ?27, settled_at_us = ?28, settled_by = ?29
		WHERE id = ?1`, deployArgs(a)...))
	var se *sqlitedrv.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return fmt.Errorf("%w: the schema admits one active attempt per environment (%w)", state.ErrDeployActive, err)
	}
	return err
}

func (t codeHostTx) ActiveDeploys(ctx context.Context, env, except string) ([]state.DeployAttempt, error) {
	args := []any{env, except}
	marks := make([]string, len(storekit.ActiveDeployStates))
	for i, st := range storekit.ActiveDeployStates {
		marks[i] = "?"
		args = append(args, st)
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT `+deployColumns+` FROM deploy_attempts
		WHERE env = ? AND id <> ? AND state IN (`+strings.Join(marks, ", ")+`) ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []state.DeployAttempt
	for rows.Next() {
		a, err := scanDeploy(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// PutPRCheck writes a PR check, a compare-and-swap on its revision, and
// in the same transaction holds the PR for the gated attempt active on its
// environment (the merge gate's write-path guard).
func (s *Store) PutPRCheck(ctx context.Context, p state.PutPRCheckParams) (state.PRCheck, error) {
	var out state.PRCheck
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.PutPRCheck(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.PRCheck{}, fmt.Errorf("sqlite: put check of %s#%d on %q: %w", p.Repo, p.Number, p.Env, err)
	}
	return out, nil
}

// GetPRCheck returns one PR check, or an error wrapping state.ErrNotFound.
func (s *Store) GetPRCheck(ctx context.Context, repo string, number int, env string) (state.PRCheck, error) {
	c, err := scanPRCheck(s.db.QueryRowContext(ctx,
		`SELECT `+prCheckColumns+` FROM pr_checks WHERE repo = ? AND number = ? AND env = ?`, repo, number, env))
	if errors.Is(err, sql.ErrNoRows) {
		return state.PRCheck{}, fmt.Errorf("sqlite: check of %s#%d on %q: %w", repo, number, env, state.ErrNotFound)
	}
	if err != nil {
		return state.PRCheck{}, fmt.Errorf("sqlite: get check of %s#%d on %q: %w", repo, number, env, err)
	}
	return c, nil
}

// ListPRChecks returns the PR checks matching p, by repo, number and env.
func (s *Store) ListPRChecks(ctx context.Context, p state.ListPRChecksParams) ([]state.PRCheck, error) {
	var (
		where = []string{"1 = 1"}
		args  []any
	)
	if p.Repo != "" {
		where, args = append(where, "repo = ?"), append(args, p.Repo)
	}
	if p.Env != "" {
		where, args = append(where, "env = ?"), append(args, p.Env)
	}
	if p.OpenOnly {
		where = append(where, "closed = 0")
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+prCheckColumns+` FROM pr_checks WHERE `+
		strings.Join(where, " AND ")+` ORDER BY repo, number, env`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list checks: %w", err)
	}
	defer rows.Close()
	var out []state.PRCheck
	for rows.Next() {
		c, err := scanPRCheck(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list checks: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list checks: %w", err)
	}
	return out, nil
}

// SetCheckDesired stores what a check run should show, moving its desired
// revision only when that changed.
func (s *Store) SetCheckDesired(ctx context.Context, p state.SetCheckDesiredParams) (state.CheckRender, error) {
	var out state.CheckRender
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.SetCheckDesired(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.CheckRender{}, fmt.Errorf("sqlite: set desired check %s: %w", p.Key, err)
	}
	return out, nil
}

// MarkCheckRendered moves the rendered revision forward, never past the
// desired one.
func (s *Store) MarkCheckRendered(ctx context.Context, p state.MarkCheckRenderedParams) (bool, error) {
	var applied bool
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		applied, err = storekit.MarkCheckRendered(ctx, tx, p)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: mark check %s rendered at revision %d: %w", p.Key, p.Revision, err)
	}
	return applied, nil
}

// MarkCheckRenderFailed records a render's error.
func (s *Store) MarkCheckRenderFailed(ctx context.Context, p state.MarkCheckRenderFailedParams) error {
	err := s.codeHost(ctx, func(tx codeHostTx) error { return storekit.MarkCheckRenderFailed(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("sqlite: mark check %s render of revision %d failed: %w", p.Key, p.Revision, err)
	}
	return nil
}

// GetCheckRender returns one check render, or an error wrapping
// state.ErrNotFound.
func (s *Store) GetCheckRender(ctx context.Context, k state.CheckKey) (state.CheckRender, error) {
	r, err := scanCheckRender(s.db.QueryRowContext(ctx, `SELECT `+checkRenderColumns+` FROM check_renders
		WHERE repo = ? AND number = ? AND head_sha = ? AND name = ?`, k.Repo, k.Number, k.HeadSHA, k.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return state.CheckRender{}, fmt.Errorf("sqlite: check %s: %w", k, state.ErrNotFound)
	}
	if err != nil {
		return state.CheckRender{}, fmt.Errorf("sqlite: get check %s: %w", k, err)
	}
	return r, nil
}

// ListCheckRenders returns the check renders matching p, by repo, number,
// head and name.
func (s *Store) ListCheckRenders(ctx context.Context, p state.ListCheckRendersParams) ([]state.CheckRender, error) {
	if p.Number < 0 {
		return nil, fmt.Errorf("sqlite: list check renders: negative pull request number %d", p.Number)
	}
	var (
		where = []string{"1 = 1"}
		args  []any
	)
	if p.Repo != "" {
		where, args = append(where, "repo = ?"), append(args, p.Repo)
	}
	if p.Number != 0 {
		where, args = append(where, "number = ?"), append(args, p.Number)
	}
	if p.HeadSHA != "" {
		where, args = append(where, "head_sha = ?"), append(args, p.HeadSHA)
	}
	if p.LaggingOnly {
		where = append(where, "rendered_revision < desired_revision")
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+checkRenderColumns+` FROM check_renders WHERE `+
		strings.Join(where, " AND ")+` ORDER BY repo, number, head_sha, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list check renders: %w", err)
	}
	defer rows.Close()
	var out []state.CheckRender
	for rows.Next() {
		r, err := scanCheckRender(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list check renders: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list check renders: %w", err)
	}
	return out, nil
}

// ClaimComment claims a comment exclusively until Now+TTL.
func (s *Store) ClaimComment(ctx context.Context, p state.ClaimCommentParams) (state.CommentClaim, error) {
	var out state.CommentClaim
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.ClaimComment(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.CommentClaim{}, fmt.Errorf("sqlite: claim comment %q on %s#%d: %w", p.Marker, p.Repo, p.Number, err)
	}
	return out, nil
}

// MarkCommentPosted records the comment its claim's holder posted.
func (s *Store) MarkCommentPosted(ctx context.Context, p state.MarkCommentPostedParams) error {
	err := s.codeHost(ctx, func(tx codeHostTx) error { return storekit.MarkCommentPosted(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("sqlite: mark comment %q on %s#%d posted: %w", p.Marker, p.Repo, p.Number, err)
	}
	return nil
}

// GetComment returns a comment's claim without its token, or an error
// wrapping state.ErrNotFound.
func (s *Store) GetComment(ctx context.Context, repo string, number int, marker string) (state.CommentClaim, error) {
	c, err := scanComment(s.db.QueryRowContext(ctx,
		`SELECT `+commentColumns+` FROM pr_comments WHERE repo = ? AND number = ? AND marker = ?`, repo, number, marker))
	if errors.Is(err, sql.ErrNoRows) {
		return state.CommentClaim{}, fmt.Errorf("sqlite: comment %q on %s#%d: %w", marker, repo, number, state.ErrNotFound)
	}
	if err != nil {
		return state.CommentClaim{}, fmt.Errorf("sqlite: get comment %q on %s#%d: %w", marker, repo, number, err)
	}
	return storekit.PublicComment(c), nil
}

// deployTransition runs one deploy transition in a write transaction.
func (s *Store) deployTransition(ctx context.Context, what, id string,
	fn func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error)) (state.DeployAttempt, error) {
	var out state.DeployAttempt
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = fn(ctx, tx)
		return err
	})
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("sqlite: %s deploy attempt %q: %w", what, id, err)
	}
	return out, nil
}

// RequestDeploy records a pending attempt, idempotently by id.
func (s *Store) RequestDeploy(ctx context.Context, p state.RequestDeployParams) (state.DeployAttempt, error) {
	return s.deployTransition(ctx, "request", p.ID, func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error) {
		return storekit.RequestDeploy(ctx, tx, p)
	})
}

// StartDeploy moves a pending attempt to running, alone on its environment.
func (s *Store) StartDeploy(ctx context.Context, p state.StartDeployParams) (state.DeployAttempt, error) {
	return s.deployTransition(ctx, "start", p.ID, func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error) {
		return storekit.StartDeploy(ctx, tx, p)
	})
}

// RenewDeploy extends a held, rendered or running attempt's unexpired
// lease.
func (s *Store) RenewDeploy(ctx context.Context, p state.RenewDeployParams) (state.DeployAttempt, error) {
	return s.deployTransition(ctx, "renew", p.ID, func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error) {
		return storekit.RenewDeploy(ctx, tx, p)
	})
}

// FinishDeploy ends a held, rendered or running attempt, pinned to its
// token.
func (s *Store) FinishDeploy(ctx context.Context, p state.FinishDeployParams) (state.DeployAttempt, error) {
	return s.deployTransition(ctx, "finish", p.ID, func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error) {
		return storekit.FinishDeploy(ctx, tx, p)
	})
}

// RecordDeployMerge records, once, the merge after a promoted attempt.
func (s *Store) RecordDeployMerge(ctx context.Context, p state.RecordDeployMergeParams) (state.DeployAttempt, error) {
	return s.deployTransition(ctx, "record the merge of", p.ID, func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error) {
		return storekit.RecordDeployMerge(ctx, tx, p)
	})
}

// CancelDeploy cancels a pending attempt.
func (s *Store) CancelDeploy(ctx context.Context, p state.CancelDeployParams) (state.DeployAttempt, error) {
	return s.deployTransition(ctx, "cancel", p.ID, func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error) {
		return storekit.CancelDeploy(ctx, tx, p)
	})
}

// GetDeploy returns one attempt, or an error wrapping state.ErrNotFound.
func (s *Store) GetDeploy(ctx context.Context, id string) (state.DeployAttempt, error) {
	a, err := scanDeploy(s.db.QueryRowContext(ctx, `SELECT `+deployColumns+` FROM deploy_attempts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return state.DeployAttempt{}, fmt.Errorf("sqlite: deploy attempt %q: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("sqlite: get deploy attempt %q: %w", id, err)
	}
	return a, nil
}

// ListDeploys returns the attempts matching p, newest (or oldest) first.
func (s *Store) ListDeploys(ctx context.Context, p state.ListDeploysParams) ([]state.DeployAttempt, error) {
	limit, err := storekit.CheckListDeploys(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deploy attempts: %w", err)
	}
	var (
		where = []string{"1 = 1"}
		args  []any
	)
	if p.Env != "" {
		where, args = append(where, "env = ?"), append(args, p.Env)
	}
	if p.Repo != "" {
		where, args = append(where, "repo = ?"), append(args, p.Repo)
	}
	if p.Number != 0 {
		where, args = append(where, "number = ?"), append(args, p.Number)
	}
	if len(p.States) > 0 {
		marks := make([]string, len(p.States))
		for i, st := range p.States {
			marks[i] = "?"
			args = append(args, st)
		}
		where = append(where, "state IN ("+strings.Join(marks, ", ")+")")
	}
	order := "created_at_us DESC, id"
	if p.OldestFirst {
		order = "created_at_us, id"
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+deployColumns+` FROM deploy_attempts WHERE `+
		strings.Join(where, " AND ")+` ORDER BY `+order+` LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deploy attempts: %w", err)
	}
	defer rows.Close()
	var out []state.DeployAttempt
	for rows.Next() {
		a, err := scanDeploy(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list deploy attempts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list deploy attempts: %w", err)
	}
	return out, nil
}
