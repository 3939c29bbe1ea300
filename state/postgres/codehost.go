package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// The code-host store (state.CodeHostStore). Every transition runs the
// shared compare-and-swap of storekit in one READ COMMITTED transaction
// that first locks the row it changes FOR UPDATE: a concurrent transition
// of the same row waits for the lock and then reads what the first
// committed. A row that does not exist yet cannot be locked, so creation is
// an INSERT ... ON CONFLICT DO NOTHING: of two creators one inserts, and
// the other (which waits for the first to commit) inserts nothing and reads
// and locks the row the first made. StartDeploy locks its own attempt and
// then the environment's active ones; two starts on one environment that
// both see none both write, and the partial unique index
// deploy_attempts_one_active makes the second wait for the first and fail,
// which is reported as state.ErrDeployActive.

// constraintOneActive is the partial unique index of one active attempt
// per environment (migration 00012).
const constraintOneActive = "deploy_attempts_one_active"

// sqlstateUniqueViolation is PostgreSQL's unique_violation.
const sqlstateUniqueViolation = "23505"

// RecordDelivery inserts a webhook delivery; a replayed id returns
// fresh=false and writes nothing (INSERT ... ON CONFLICT DO NOTHING).
func (s *Store) RecordDelivery(ctx context.Context, p state.RecordDeliveryParams) (bool, error) {
	if err := storekit.CheckRecordDelivery(p); err != nil {
		return false, fmt.Errorf("postgres state: record delivery: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO webhook_deliveries (id, event, action, repo, received_at_us) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING`,
		p.ID, p.Event, p.Action, p.Repo, storekit.Micros(p.Now))
	if err != nil {
		return false, fmt.Errorf("postgres state: record delivery %q: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FinishDelivery records a delivery's outcome; the last write wins.
func (s *Store) FinishDelivery(ctx context.Context, p state.FinishDeliveryParams) error {
	if err := storekit.CheckFinishDelivery(p); err != nil {
		return fmt.Errorf("postgres state: finish delivery: %w", err)
	}
	tag, err := s.pool.Exec(ctx,
		`UPDATE webhook_deliveries SET status = $1, error = $2, processed_at_us = $3 WHERE id = $4`,
		p.Status, p.Error, storekit.Micros(p.Now), p.ID)
	if err != nil {
		return fmt.Errorf("postgres state: finish delivery %q: %w", p.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres state: finish delivery %q: no such delivery: %w", p.ID, state.ErrNotFound)
	}
	return nil
}

// filter builds a WHERE clause of $n parameters.
type filter struct {
	where []string
	args  []any
}

// eq adds "col = value".
func (f *filter) eq(col string, v any) {
	f.args = append(f.args, v)
	f.where = append(f.where, col+" = $"+strconv.Itoa(len(f.args)))
}

// cond adds a condition without parameters.
func (f *filter) cond(c string) { f.where = append(f.where, c) }

// param adds a parameter and returns its placeholder.
func (f *filter) param(v any) string {
	f.args = append(f.args, v)
	return "$" + strconv.Itoa(len(f.args))
}

// clause is the WHERE clause (true when empty).
func (f *filter) clause() string {
	if len(f.where) == 0 {
		return "true"
	}
	return strings.Join(f.where, " AND ")
}

// ListDeliveries returns deliveries newest first.
func (s *Store) ListDeliveries(ctx context.Context, p state.ListDeliveriesParams) ([]state.Delivery, error) {
	limit, err := storekit.ListLimit(p.Limit)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list deliveries: %w", err)
	}
	var f filter
	for _, c := range []struct{ col, v string }{{"repo", p.Repo}, {"event", p.Event}, {"status", p.Status}} {
		if c.v != "" {
			f.eq(c.col, c.v)
		}
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, event, action, repo, status, error, received_at_us, processed_at_us
		FROM webhook_deliveries WHERE `+f.clause()+`
		ORDER BY received_at_us DESC, id LIMIT `+f.param(limit), f.args...)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Delivery, error) {
		var (
			d                   state.Delivery
			received, processed int64
		)
		if err := row.Scan(&d.ID, &d.Event, &d.Action, &d.Repo, &d.Status, &d.Error, &received, &processed); err != nil {
			return state.Delivery{}, err
		}
		d.ReceivedAt, d.ProcessedAt = storekit.FromMicros(received), storekit.FromMicros(processed)
		return d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: list deliveries: %w", err)
	}
	return out, nil
}

// codeHostTx is storekit.CodeHostTx on a transaction: its reads lock FOR
// UPDATE.
type codeHostTx struct{ tx pgx.Tx }

// codeHost runs fn, a code-host transition, in one transaction.
func (s *Store) codeHost(ctx context.Context, fn func(tx codeHostTx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(codeHostTx{tx}) })
}

// inserted reports whether an INSERT ... ON CONFLICT DO NOTHING inserted.
func inserted(tag pgconn.CommandTag, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// updatedOne requires an UPDATE to have changed exactly one row.
func updatedOne(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return err
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("updated %d rows, not 1", n)
	}
	return nil
}

const prCheckColumns = `repo, number, env, head_sha, base_sha, merge_sha, pr_environment, plan_id,
	planned_generation, verdict, summary, detail, closed, revision, updated_at_us`

// prCheckSelect reads prCheckColumns, the JSON as text.
const prCheckSelect = `repo, number, env, head_sha, base_sha, merge_sha, pr_environment, plan_id,
	planned_generation, verdict, summary, detail::text, closed, revision, updated_at_us`

func scanPRCheck(row pgx.Row) (state.PRCheck, error) {
	var (
		c       state.PRCheck
		number  int32
		detail  *string
		updated int64
	)
	if err := row.Scan(&c.Repo, &number, &c.Env, &c.HeadSHA, &c.BaseSHA, &c.MergeSHA, &c.PREnvironment, &c.PlanID,
		&c.PlannedGeneration, &c.Verdict, &c.Summary, &detail, &c.Closed, &c.Revision, &updated); err != nil {
		return state.PRCheck{}, err
	}
	c.Number, c.UpdatedAt = int(number), storekit.FromMicros(updated)
	if detail != nil {
		c.Detail = []byte(*detail)
	}
	return c, nil
}

func prCheckArgs(c state.PRCheck) []any {
	var detail *string
	if len(c.Detail) > 0 {
		d := string(c.Detail)
		detail = &d
	}
	return []any{c.Repo, c.Number, c.Env, c.HeadSHA, c.BaseSHA, c.MergeSHA, c.PREnvironment, c.PlanID,
		c.PlannedGeneration, c.Verdict, c.Summary, detail, c.Closed, c.Revision, storekit.Micros(c.UpdatedAt)}
}

func (t codeHostTx) PRCheck(ctx context.Context, repo string, number int, env string) (state.PRCheck, bool, error) {
	c, err := scanPRCheck(t.tx.QueryRow(ctx,
		`SELECT `+prCheckSelect+` FROM pr_checks WHERE repo = $1 AND number = $2 AND env = $3 FOR UPDATE`, repo, number, env))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.PRCheck{}, false, nil
	}
	return c, err == nil, err
}

func (t codeHostTx) InsertPRCheck(ctx context.Context, c state.PRCheck) (bool, error) {
	return inserted(t.tx.Exec(ctx, `
		INSERT INTO pr_checks (`+prCheckColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::json, $13, $14, $15)
		ON CONFLICT (repo, number, env) DO NOTHING`, prCheckArgs(c)...))
}

func (t codeHostTx) UpdatePRCheck(ctx context.Context, c state.PRCheck) error {
	return updatedOne(t.tx.Exec(ctx, `
		UPDATE pr_checks SET head_sha = $4, base_sha = $5, merge_sha = $6, pr_environment = $7, plan_id = $8,
			planned_generation = $9, verdict = $10, summary = $11, detail = $12::json, closed = $13, revision = $14,
			updated_at_us = $15
		WHERE repo = $1 AND number = $2 AND env = $3`, prCheckArgs(c)...))
}

const checkRenderColumns = `repo, number, head_sha, name, desired, desired_revision, rendered_revision,
	check_run_id, last_error, updated_at_us, rendered_at_us`

// checkRenderSelect reads checkRenderColumns, the JSON as text.
const checkRenderSelect = `repo, number, head_sha, name, desired::text, desired_revision, rendered_revision,
	check_run_id, last_error, updated_at_us, rendered_at_us`

func scanCheckRender(row pgx.Row) (state.CheckRender, error) {
	var (
		r                 state.CheckRender
		number            int32
		desired           string
		updated, rendered int64
	)
	if err := row.Scan(&r.Key.Repo, &number, &r.Key.HeadSHA, &r.Key.Name, &desired, &r.DesiredRevision,
		&r.RenderedRevision, &r.CheckRunID, &r.LastError, &updated, &rendered); err != nil {
		return state.CheckRender{}, err
	}
	d, err := storekit.ParseDesired(desired)
	if err != nil {
		return state.CheckRender{}, err
	}
	r.Key.Number, r.Desired = int(number), d
	r.UpdatedAt, r.RenderedAt = storekit.FromMicros(updated), storekit.FromMicros(rendered)
	return r, nil
}

func checkRenderArgs(r state.CheckRender) []any {
	return []any{r.Key.Repo, r.Key.Number, r.Key.HeadSHA, r.Key.Name, storekit.DesiredJSON(r.Desired), r.DesiredRevision,
		r.RenderedRevision, r.CheckRunID, r.LastError, storekit.Micros(r.UpdatedAt), storekit.Micros(r.RenderedAt)}
}

func (t codeHostTx) CheckRender(ctx context.Context, k state.CheckKey) (state.CheckRender, bool, error) {
	r, err := scanCheckRender(t.tx.QueryRow(ctx, `SELECT `+checkRenderSelect+` FROM check_renders
		WHERE repo = $1 AND number = $2 AND head_sha = $3 AND name = $4 FOR UPDATE`, k.Repo, k.Number, k.HeadSHA, k.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.CheckRender{}, false, nil
	}
	return r, err == nil, err
}

func (t codeHostTx) InsertCheckRender(ctx context.Context, r state.CheckRender) (bool, error) {
	return inserted(t.tx.Exec(ctx, `
		INSERT INTO check_renders (`+checkRenderColumns+`) VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (repo, number, head_sha, name) DO NOTHING`, checkRenderArgs(r)...))
}

func (t codeHostTx) UpdateCheckRender(ctx context.Context, r state.CheckRender) error {
	return updatedOne(t.tx.Exec(ctx, `
		UPDATE check_renders SET desired = $5::json, desired_revision = $6, rendered_revision = $7, check_run_id = $8,
			last_error = $9, updated_at_us = $10, rendered_at_us = $11
		WHERE repo = $1 AND number = $2 AND head_sha = $3 AND name = $4`, checkRenderArgs(r)...))
}

const commentColumns = `repo, number, marker, owner, token, claimed_at_us, expires_at_us, comment_id, posted_at_us`

func scanComment(row pgx.Row) (state.CommentClaim, error) {
	var (
		c                        state.CommentClaim
		number                   int32
		claimed, expires, posted int64
	)
	if err := row.Scan(&c.Repo, &number, &c.Marker, &c.Owner, &c.Token, &claimed, &expires, &c.CommentID, &posted); err != nil {
		return state.CommentClaim{}, err
	}
	c.Number = int(number)
	c.ClaimedAt, c.ExpiresAt, c.PostedAt = storekit.FromMicros(claimed), storekit.FromMicros(expires), storekit.FromMicros(posted)
	c.Posted = c.CommentID > 0
	return c, nil
}

func commentArgs(c state.CommentClaim) []any {
	return []any{c.Repo, c.Number, c.Marker, c.Owner, c.Token, storekit.Micros(c.ClaimedAt), storekit.Micros(c.ExpiresAt),
		c.CommentID, storekit.Micros(c.PostedAt)}
}

func (t codeHostTx) Comment(ctx context.Context, repo string, number int, marker string) (state.CommentClaim, bool, error) {
	c, err := scanComment(t.tx.QueryRow(ctx,
		`SELECT `+commentColumns+` FROM pr_comments WHERE repo = $1 AND number = $2 AND marker = $3 FOR UPDATE`,
		repo, number, marker))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.CommentClaim{}, false, nil
	}
	return c, err == nil, err
}

func (t codeHostTx) InsertComment(ctx context.Context, c state.CommentClaim) (bool, error) {
	return inserted(t.tx.Exec(ctx, `
		INSERT INTO pr_comments (`+commentColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (repo, number, marker) DO NOTHING`, commentArgs(c)...))
}

func (t codeHostTx) UpdateComment(ctx context.Context, c state.CommentClaim) error {
	return updatedOne(t.tx.Exec(ctx, `
		UPDATE pr_comments SET owner = $4, token = $5, claimed_at_us = $6, expires_at_us = $7, comment_id = $8,
			posted_at_us = $9
		WHERE repo = $1 AND number = $2 AND marker = $3`, commentArgs(c)...))
}

const deployColumns = `id, env, repo, number, head_sha, origin, trigger_kind, requested_by, state, owner,
	lease_token, lease_expires_at_us, plan_id, result_generation, error, merge_sha, merge_error,
	merge_recorded_at_us, created_at_us, started_at_us, finished_at_us, updated_at_us,
	mode, base_generation, holds_recorded_at_us, holds_rendered_at_us, promoted_at_us, settled_at_us, settled_by`

func scanDeploy(row pgx.Row) (state.DeployAttempt, error) {
	var (
		a                                        state.DeployAttempt
		number                                   int32
		expires, merged, created, started, ended int64
		updated, recorded, rendered, promoted    int64
		settled                                  int64
	)
	if err := row.Scan(&a.ID, &a.Env, &a.Repo, &number, &a.HeadSHA, &a.Origin, &a.Trigger, &a.RequestedBy, &a.State,
		&a.Owner, &a.LeaseToken, &expires, &a.PlanID, &a.ResultGeneration, &a.Error, &a.MergeSHA, &a.MergeError,
		&merged, &created, &started, &ended, &updated,
		&a.Mode, &a.BaseGeneration, &recorded, &rendered, &promoted, &settled, &a.SettledBy); err != nil {
		return state.DeployAttempt{}, err
	}
	a.Number = int(number)
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
	a, err := scanDeploy(t.tx.QueryRow(ctx, `SELECT `+deployColumns+` FROM deploy_attempts WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.DeployAttempt{}, false, nil
	}
	return a, err == nil, err
}

func (t codeHostTx) InsertDeploy(ctx context.Context, a state.DeployAttempt) (bool, error) {
	return inserted(t.tx.Exec(ctx, `
		INSERT INTO deploy_attempts (`+deployColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
			$23, $24, $25, $26, $27, $28, $29)
		ON CONFLICT (id) DO NOTHING`, deployArgs(a)...))
}

func (t codeHostTx) UpdateDeploy(ctx context.Context, a state.DeployAttempt) error {
	err := updatedOne(t.tx.Exec(ctx, `
		UPDATE deploy_attempts SET env = $2, repo = $3, number = $4, head_sha = $5, origin = $6, trigger_kind = $7,
			requested_by = $8, state = $9, owner = $10, lease_token = $11, lease_expires_at_us = $12, plan_id = $13,
			result_generation = $14, error = $15, merge_sha = $16, merge_error = $17, merge_recorded_at_us = $18,
			created_at_us = $19, started_at_us = $20, finished_at_us = $21, updated_at_us = $22,
			mode = $23, base_generation = $24, holds_recorded_at_us = $25, holds_rendered_at_us = $26,
			promoted_at_us = $27, settled_at_us = $28, settled_by = $29
		WHERE id = $1`, deployArgs(a)...))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateUniqueViolation && pgErr.ConstraintName == constraintOneActive {
		return fmt.Errorf("%w: another attempt became active on %q meanwhile (%w)", state.ErrDeployActive, a.Env, err)
	}
	return err
}

func (t codeHostTx) ActiveDeploys(ctx context.Context, env, except string) ([]state.DeployAttempt, error) {
	rows, err := t.tx.Query(ctx, `SELECT `+deployColumns+` FROM deploy_attempts
		WHERE env = $1 AND id <> $2 AND state = ANY($3) ORDER BY id FOR UPDATE`, env, except, storekit.ActiveDeployStates)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.DeployAttempt, error) { return scanDeploy(row) })
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
		return state.PRCheck{}, fmt.Errorf("postgres state: put check of %s#%d on %q: %w", p.Repo, p.Number, p.Env, err)
	}
	return out, nil
}

// GetPRCheck returns one PR check, or an error wrapping state.ErrNotFound.
func (s *Store) GetPRCheck(ctx context.Context, repo string, number int, env string) (state.PRCheck, error) {
	c, err := scanPRCheck(s.pool.QueryRow(ctx,
		`SELECT `+prCheckSelect+` FROM pr_checks WHERE repo = $1 AND number = $2 AND env = $3`, repo, number, env))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.PRCheck{}, fmt.Errorf("postgres state: check of %s#%d on %q: %w", repo, number, env, state.ErrNotFound)
	}
	if err != nil {
		return state.PRCheck{}, fmt.Errorf("postgres state: get check of %s#%d on %q: %w", repo, number, env, err)
	}
	return c, nil
}

// ListPRChecks returns the PR checks matching p, by repo, number and env.
func (s *Store) ListPRChecks(ctx context.Context, p state.ListPRChecksParams) ([]state.PRCheck, error) {
	var f filter
	if p.Repo != "" {
		f.eq("repo", p.Repo)
	}
	if p.Env != "" {
		f.eq("env", p.Env)
	}
	if p.OpenOnly {
		f.cond("NOT closed")
	}
	rows, err := s.pool.Query(ctx, `SELECT `+prCheckSelect+` FROM pr_checks WHERE `+f.clause()+
		` ORDER BY repo, number, env`, f.args...)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list checks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.PRCheck, error) { return scanPRCheck(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres state: list checks: %w", err)
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
		return state.CheckRender{}, fmt.Errorf("postgres state: set desired check %s: %w", p.Key, err)
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
		return false, fmt.Errorf("postgres state: mark check %s rendered at revision %d: %w", p.Key, p.Revision, err)
	}
	return applied, nil
}

// MarkCheckRenderFailed records a render's error.
func (s *Store) MarkCheckRenderFailed(ctx context.Context, p state.MarkCheckRenderFailedParams) error {
	err := s.codeHost(ctx, func(tx codeHostTx) error { return storekit.MarkCheckRenderFailed(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("postgres state: mark check %s render of revision %d failed: %w", p.Key, p.Revision, err)
	}
	return nil
}

// GetCheckRender returns one check render, or an error wrapping
// state.ErrNotFound.
func (s *Store) GetCheckRender(ctx context.Context, k state.CheckKey) (state.CheckRender, error) {
	r, err := scanCheckRender(s.pool.QueryRow(ctx, `SELECT `+checkRenderSelect+` FROM check_renders
		WHERE repo = $1 AND number = $2 AND head_sha = $3 AND name = $4`, k.Repo, k.Number, k.HeadSHA, k.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.CheckRender{}, fmt.Errorf("postgres state: check %s: %w", k, state.ErrNotFound)
	}
	if err != nil {
		return state.CheckRender{}, fmt.Errorf("postgres state: get check %s: %w", k, err)
	}
	return r, nil
}

// ListCheckRenders returns the check renders matching p, by repo, number,
// head and name.
func (s *Store) ListCheckRenders(ctx context.Context, p state.ListCheckRendersParams) ([]state.CheckRender, error) {
	if p.Number < 0 {
		return nil, fmt.Errorf("postgres state: list check renders: negative pull request number %d", p.Number)
	}
	var f filter
	if p.Repo != "" {
		f.eq("repo", p.Repo)
	}
	if p.Number != 0 {
		f.eq("number", p.Number)
	}
	if p.HeadSHA != "" {
		f.eq("head_sha", p.HeadSHA)
	}
	if p.LaggingOnly {
		f.cond("rendered_revision < desired_revision")
	}
	rows, err := s.pool.Query(ctx, `SELECT `+checkRenderSelect+` FROM check_renders WHERE `+f.clause()+
		` ORDER BY repo, number, head_sha, name`, f.args...)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list check renders: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.CheckRender, error) { return scanCheckRender(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres state: list check renders: %w", err)
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
		return state.CommentClaim{}, fmt.Errorf("postgres state: claim comment %q on %s#%d: %w", p.Marker, p.Repo, p.Number, err)
	}
	return out, nil
}

// MarkCommentPosted records the comment its claim's holder posted.
func (s *Store) MarkCommentPosted(ctx context.Context, p state.MarkCommentPostedParams) error {
	err := s.codeHost(ctx, func(tx codeHostTx) error { return storekit.MarkCommentPosted(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("postgres state: mark comment %q on %s#%d posted: %w", p.Marker, p.Repo, p.Number, err)
	}
	return nil
}

// GetComment returns a comment's claim without its token, or an error
// wrapping state.ErrNotFound.
func (s *Store) GetComment(ctx context.Context, repo string, number int, marker string) (state.CommentClaim, error) {
	c, err := scanComment(s.pool.QueryRow(ctx,
		`SELECT `+commentColumns+` FROM pr_comments WHERE repo = $1 AND number = $2 AND marker = $3`, repo, number, marker))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.CommentClaim{}, fmt.Errorf("postgres state: comment %q on %s#%d: %w", marker, repo, number, state.ErrNotFound)
	}
	if err != nil {
		return state.CommentClaim{}, fmt.Errorf("postgres state: get comment %q on %s#%d: %w", marker, repo, number, err)
	}
	return storekit.PublicComment(c), nil
}

// deployTransition runs one deploy transition in a transaction.
func (s *Store) deployTransition(ctx context.Context, what, id string,
	fn func(ctx context.Context, tx storekit.CodeHostTx) (state.DeployAttempt, error)) (state.DeployAttempt, error) {
	var out state.DeployAttempt
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = fn(ctx, tx)
		return err
	})
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("postgres state: %s deploy attempt %q: %w", what, id, err)
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
	a, err := scanDeploy(s.pool.QueryRow(ctx, `SELECT `+deployColumns+` FROM deploy_attempts WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.DeployAttempt{}, fmt.Errorf("postgres state: deploy attempt %q: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("postgres state: get deploy attempt %q: %w", id, err)
	}
	return a, nil
}

// ListDeploys returns the attempts matching p, newest (or oldest) first.
func (s *Store) ListDeploys(ctx context.Context, p state.ListDeploysParams) ([]state.DeployAttempt, error) {
	limit, err := storekit.CheckListDeploys(p)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list deploy attempts: %w", err)
	}
	var f filter
	if p.Env != "" {
		f.eq("env", p.Env)
	}
	if p.Repo != "" {
		f.eq("repo", p.Repo)
	}
	if p.Number != 0 {
		f.eq("number", p.Number)
	}
	if len(p.States) > 0 {
		f.cond("state = ANY(" + f.param(p.States) + ")")
	}
	order := "created_at_us DESC, id"
	if p.OldestFirst {
		order = "created_at_us, id"
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deployColumns+` FROM deploy_attempts WHERE `+f.clause()+
		` ORDER BY `+order+` LIMIT `+f.param(limit), f.args...)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list deploy attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.DeployAttempt, error) { return scanDeploy(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres state: list deploy attempts: %w", err)
	}
	return out, nil
}
