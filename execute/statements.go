package execute

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

// StatementError is a model's pre- or post-statement, or a before_all /
// after_all statement of the configuration, that failed: rendering it,
// refusing it as session-scoped (model.SessionScoped), or running it.
// Pos is where the statement is written (the model file, or the
// configuration file's list item).
type StatementError struct {
	// Kind is "pre-statement", "post-statement", "before_all" or
	// "after_all".
	Kind string
	Pos  model.Pos
	// SQL is the statement as rendered; "" when rendering failed.
	SQL string
	Err error
}

func (e *StatementError) Error() string {
	return fmt.Sprintf("%s at %s:%d:%d: %v", e.Kind, e.Pos.File, e.Pos.Line, e.Pos.Col, e.Err)
}

func (e *StatementError) Unwrap() error { return e.Err }

// statementVars are the macro values a model's statements see, the same as
// its query's for the batch's interval r at exec (see Template.Render).
func (t *Template) statementVars(r interval.Range, exec time.Time) macro.Vars {
	return macro.Vars{Start: r.Start, End: r.End, Execution: exec, ThisModel: t.thisModel, Env: t.macros}
}

// runStatements runs a model's pre-statements (post false) or
// post-statements (post true) for the batch of interval r (the whole
// range for a kind built whole), in the order written, each rendered as
// the query is (@start_ds, @this_model, ... for r at exec) and run on its
// own: a statement's effect outlasts its session (session-scoped ones are
// refused at load, and here again once rendered), so running them on
// the engine's pool is what they mean.
//
// It stops at the first failure and returns it as a *BatchError for r
// (whole: the zero interval) wrapping a *StatementError, having emitted
// BatchEnded: the caller records nothing. A pre-statement failure leaves
// the batch unwritten; a post-statement failure comes after the write
// committed, so the rows are in the table but the interval is not
// recorded, and the re-run that computes it again replaces exactly those
// rows (InsertInterval, MergeByKey and ReplaceTable never duplicate).
func (x *Executor) runStatements(ctx context.Context, t *Template, post bool, r interval.Range, whole bool, exec time.Time) error {
	s := t.Snapshot
	sts, kind := s.Model.PreStatements, "pre-statement"
	if post {
		sts, kind = s.Model.PostStatements, "post-statement"
	}
	for _, st := range sts {
		err := runStatement(ctx, x.Engine, kind, st, t.dialect, t.statementVars(r, exec))
		if err == nil {
			continue
		}
		be := &BatchError{Model: s.Name, Version: s.Version, Err: err}
		if !whole {
			be.Interval = r
		}
		ended := BatchEnded{Model: s.Name, Version: s.Version, Interval: r.String(), Whole: whole, Err: err}
		if ierr := interrupted(ctx); ierr != nil {
			ended.Interrupted, ended.Err, be.Err = true, ierr, ierr
		}
		x.emit(ctx, ended)
		return be
	}
	return nil
}

// runStatement renders one statement with vars and runs it on e, or
// refuses it when, rendered, it is session-scoped. Every failure is a
// *StatementError naming kind and st's position.
func runStatement(ctx context.Context, e warehouse.Engine, kind string, st model.Statement, dialect string, vars macro.Vars) error {
	sql, err := macro.Render(st.SQL, vars, dialect)
	if err != nil {
		return &StatementError{Kind: kind, Pos: st.Pos, Err: fmt.Errorf("rendering macros: %w", err)}
	}
	sql = strings.TrimSpace(sql)
	if _, ok := hasStatement(sql); !ok {
		return nil // a macro (@IF) rendered to nothing
	}
	if why := model.SessionScoped(sql); why != "" {
		return &StatementError{Kind: kind, Pos: st.Pos, SQL: sql, Err: fmt.Errorf("%s; gapless runs each statement on its own pooled connection, so it is refused", why)}
	}
	if _, err := e.Query(ctx, sql); err != nil {
		return &StatementError{Kind: kind, Pos: st.Pos, SQL: sql, Err: err}
	}
	return nil
}

// hasStatement reports whether sql holds more than whitespace, comments
// and ';'.
func hasStatement(sql string) (string, bool) {
	s := commentRE.ReplaceAllString(sql, "")
	s = strings.Trim(s, " \t\r\n\f\v;")
	return s, s != ""
}

var commentRE = regexp.MustCompile(`(?s)--[^\n]*|/\*.*?\*/`)

// EnvironmentStatements are the configuration's before_all and after_all
// statements (SQLMesh's environment statements): run once at the start and
// once at the end of each plan apply and each run, on the warehouse.
type EnvironmentStatements struct {
	BeforeAll, AfterAll []model.Statement
	// Variables are the project's macro variables (@name, @VAR('name')).
	Variables map[string]any
}

// NewEnvironmentStatements are before and after as EnvironmentStatements
// with the project's variables; nil (nothing to run) when both are empty.
func NewEnvironmentStatements(before, after []model.Statement, vars map[string]any) *EnvironmentStatements {
	if len(before)+len(after) == 0 {
		return nil
	}
	return &EnvironmentStatements{BeforeAll: before, AfterAll: after, Variables: vars}
}

// thisEnvRE matches SQLMesh's @this_env variable (not @this_environment).
var thisEnvRE = regexp.MustCompile(`(?i)@this_env\b|@\{this_env\}`)

// RunBefore runs the before_all statements for environment env at
// execution time exec; RunAfter the after_all ones. Each statement is
// rendered with @this_env (the environment's name, a string literal), the
// execution-time variables (@execution_ds, ...) and the project's
// variables, and run on its own, in order; the first failure stops them
// and is returned as a *StatementError naming the statement's file:line.
// A nil receiver runs nothing.
func (s *EnvironmentStatements) RunBefore(ctx context.Context, e warehouse.Engine, env string, exec time.Time) error {
	if s == nil {
		return nil
	}
	return s.run(ctx, e, "before_all", s.BeforeAll, env, exec)
}

// RunAfter is RunBefore for the after_all statements.
func (s *EnvironmentStatements) RunAfter(ctx context.Context, e warehouse.Engine, env string, exec time.Time) error {
	if s == nil {
		return nil
	}
	return s.run(ctx, e, "after_all", s.AfterAll, env, exec)
}

func (s *EnvironmentStatements) run(ctx context.Context, e warehouse.Engine, kind string, sts []model.Statement, env string, exec time.Time) error {
	if len(sts) == 0 {
		return nil
	}
	menv := &macro.Env{Variables: s.Variables}
	lit := "'" + strings.ReplaceAll(env, "'", "''") + "'"
	for _, st := range sts {
		st.SQL = thisEnvRE.ReplaceAllLiteralString(st.SQL, lit)
		expanded, _, err := macro.Expand(st.SQL, menv, e.Dialect())
		if err != nil {
			return &StatementError{Kind: kind, Pos: st.Pos, Err: fmt.Errorf("expanding macros: %w", err)}
		}
		st.SQL = expanded
		if err := runStatement(ctx, e, kind, st, e.Dialect(), macro.Vars{Execution: exec, Env: menv}); err != nil {
			return err
		}
	}
	return nil
}

// RunOnVirtualUpdate runs s's on-virtual-update statements
// (model.Model.OnVirtualUpdate) once its environment view has been
// (re)pointed: in order, each rendered with @this_model the view (quoted
// as the engine quotes it, as SQLMesh resolves @this_model there to the
// virtual layer's name) and the execution-time variables at exec, and run
// on its own. The first failure stops them and is returned as a
// *StatementError (kind "on-virtual-update statement") naming its file:line.
func RunOnVirtualUpdate(ctx context.Context, e warehouse.Engine, s *snapshot.Snapshot, view warehouse.Table, exec time.Time) error {
	vars := macro.Vars{Execution: exec, ThisModel: e.QuoteTable(view)}
	for _, st := range s.Model.OnVirtualUpdate {
		if err := runStatement(ctx, e, "on-virtual-update statement", st, e.Dialect(), vars); err != nil {
			return fmt.Errorf("model %s, view %s: %w", s.Name, view, err)
		}
	}
	return nil
}
