package execute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/audit"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// AuditSampleRows is how many offending rows an audit failure shows.
const AuditSampleRows = 5

// The messages an audit logs.
const (
	MsgAuditPassed = "audit passed"
	MsgAuditFailed = "audit failed"
	MsgAuditWarned = "non-blocking audit failed"
)

// AuditResult is one audit's outcome over one interval of one version.
type AuditResult struct {
	Audit    string
	Model    string
	Version  string
	Blocking bool
	// Interval is the range @this_model was restricted to; zero when the
	// audit read the whole table (a kind built whole, or not by time).
	Interval interval.Range
	// Count is the number of offending rows; Sample the first of them
	// (up to AuditSampleRows), nil when there are none.
	Count  int64
	Sample *warehouse.Result
	SQL    string
	// Err is set when the audit's query itself failed: the audit could
	// not tell, which counts as a failure.
	Err error
}

// Passed reports whether the audit ran and found no offending row.
func (r AuditResult) Passed() bool { return r.Err == nil && r.Count == 0 }

// Describe is one line for people: the audit, the model, the interval and
// what went wrong, with the sample rows on the following lines.
func (r AuditResult) Describe() string {
	where := "the whole table"
	if !r.Interval.Empty() {
		where = "interval " + r.Interval.String()
	}
	kind := "blocking"
	if !r.Blocking {
		kind = "non-blocking"
	}
	switch {
	case r.Err != nil:
		return fmt.Sprintf("%s audit %s of model %s, %s: the audit's query failed: %v", kind, r.Audit, r.Model, where, r.Err)
	case r.Count == 0:
		return fmt.Sprintf("audit %s of model %s, %s: passed", r.Audit, r.Model, where)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s audit %s of model %s failed for %s: %d offending row(s)", kind, r.Audit, r.Model, where, r.Count)
	if r.Sample != nil && len(r.Sample.Rows) > 0 {
		fmt.Fprintf(&b, "; sample (%d):", len(r.Sample.Rows))
		for _, row := range r.Sample.Rows {
			b.WriteString("\n    ")
			for i, v := range row {
				if i > 0 {
					b.WriteString(", ")
				}
				name := ""
				if i < len(r.Sample.Columns) {
					name = r.Sample.Columns[i]
				}
				fmt.Fprintf(&b, "%s=%s", name, formatValue(v))
			}
		}
	}
	return b.String()
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999")
	case []byte:
		return fmt.Sprintf("%q", x)
	case string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v)
}

// AuditError is a blocking audit that failed: the batch it audited is not
// recorded. Failed holds every blocking failure of the batch.
type AuditError struct {
	Failed []AuditResult
}

func (e *AuditError) Error() string {
	msgs := make([]string, len(e.Failed))
	for i, r := range e.Failed {
		msgs[i] = r.Describe()
	}
	return strings.Join(msgs, "\n")
}

// ErrAuditFailed is wrapped by every *AuditError.
var ErrAuditFailed = errors.New("blocking audit failed")

// Unwrap makes errors.Is(err, ErrAuditFailed) hold.
func (e *AuditError) Unwrap() error { return ErrAuditFailed }

// auditLibrary is x.Audits, or the project's audits/ folder read now.
func (x *Executor) auditLibrary() (*audit.Library, error) {
	if x.Audits != nil {
		return x.Audits, nil
	}
	lib, err := audit.LoadDir(x.ProjectDir)
	if err != nil {
		return nil, fmt.Errorf("reading the project's audits: %w", err)
	}
	return lib, nil
}

// bindAudits resolves m's audits; nil when it has none.
func (x *Executor) bindAudits(m *model.Model) ([]audit.Bound, error) {
	if len(m.Audits) == 0 {
		return nil, nil
	}
	lib, err := x.auditLibrary()
	if err != nil {
		return nil, err
	}
	return audit.Bind(m, lib)
}

// AuditParams are what Audit runs.
type AuditParams struct {
	Template *Template
	// Interval restricts @this_model to its rows, for a model by time
	// range; zero reads the whole table.
	Interval interval.Range
	// Execution is the execution time the audits' macros see.
	Execution time.Time
}

// Audit runs every audit of the template's model over its physical table
// (restricted to p.Interval for an INCREMENTAL_BY_TIME_RANGE model), records
// each outcome as a history event and logs it. It writes nothing to the
// warehouse. The error is for what kept the audits from running (an unknown
// audit, a bad argument, the state store); a failing audit is a result.
func (x *Executor) Audit(ctx context.Context, p AuditParams) ([]AuditResult, error) {
	m := p.Template.Snapshot.Model
	auds, err := x.bindAudits(m)
	if err != nil {
		return nil, err
	}
	text, err := x.textTime(ctx, p.Template)
	if err != nil {
		return nil, err
	}
	return x.runAudits(ctx, p.Template, auds, p.Interval, text, p.Execution), nil
}

// runAudits runs auds over t's table restricted to r (zero: all of it).
func (x *Executor) runAudits(ctx context.Context, t *Template, auds []audit.Bound, r interval.Range, text *model.TimeFormat, exec time.Time) []AuditResult {
	s := t.Snapshot
	if s.Model.Kind != model.KindIncrementalByTimeRange {
		r = interval.Range{}
	}
	table := x.Engine.QuoteTable(t.Table)
	relation, aliased := table, table
	if !r.Empty() {
		lo, hi := x.timeLiteral(r.Start, text), x.timeLiteral(r.End, text)
		col := x.Engine.QuoteIdent(s.Model.TimeColumn)
		relation = fmt.Sprintf("(SELECT * FROM %s WHERE %s >= %s AND %s < %s)", table, col, lo, col, hi)
		aliased = relation + " AS " + x.Engine.QuoteIdent(s.Model.Table())
	}
	vars := macro.Vars{Start: r.Start, End: r.End, Execution: exec}
	if r.Empty() {
		if whole, ok := WholeRange(s.Model, exec); ok {
			vars.Start, vars.End = whole.Start, whole.End
		}
	}
	out := make([]AuditResult, 0, len(auds))
	for _, a := range auds {
		res := AuditResult{Audit: a.Name, Model: s.Name, Version: s.Version, Blocking: a.Blocking, Interval: r}
		res.SQL, res.Err = a.Query(audit.Relation{This: relation, Aliased: aliased, Table: table}, vars, x.Engine.Dialect())
		if res.Err == nil {
			res.Count, res.Sample, res.Err = x.auditRows(ctx, res.SQL)
		}
		if ctx.Err() != nil {
			res.Err = interrupted(ctx)
		}
		x.recordAudit(ctx, res)
		out = append(out, res)
	}
	return out
}

// timeLiteral is a bound of an interval as the time column compares: text
// in the column's format, or a timestamp.
func (x *Executor) timeLiteral(at time.Time, text *model.TimeFormat) string {
	if text != nil {
		return "'" + strings.ReplaceAll(text.Format(at), "'", "''") + "'"
	}
	return "CAST('" + at.UTC().Format("2006-01-02 15:04:05.999999") + "' AS TIMESTAMP)"
}

// auditRows counts the rows an audit's query returns and reads a sample.
func (x *Executor) auditRows(ctx context.Context, q string) (int64, *warehouse.Result, error) {
	res, err := x.Engine.ReadOnlyQuery(ctx, "SELECT COUNT(*) FROM (\n"+q+"\n) AS gapless_audit")
	if err != nil {
		return 0, nil, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, nil, fmt.Errorf("counting an audit's rows: %d rows back", len(res.Rows))
	}
	var n int64
	switch v := res.Rows[0][0].(type) {
	case int64:
		n = v
	case int32:
		n = int64(v)
	case uint64:
		n = int64(v)
	default:
		return 0, nil, fmt.Errorf("counting an audit's rows: a %T back", v)
	}
	if n == 0 {
		return 0, nil, nil
	}
	sample, err := x.Engine.ReadOnlyQuery(ctx, fmt.Sprintf("SELECT * FROM (\n%s\n) AS gapless_audit LIMIT %d", q, AuditSampleRows))
	if err != nil {
		return n, nil, err
	}
	return n, sample, nil
}

// recordAudit logs res and appends its history event. A failure to append
// is logged, not returned: the audit's outcome stands either way.
func (x *Executor) recordAudit(ctx context.Context, res AuditResult) {
	l := x.logger()
	attrs := []any{slog.String(logkey.Audit, res.Audit), slog.String(logkey.Model, res.Model), slog.String(logkey.Version, res.Version),
		slog.Int64(logkey.Rows, res.Count)}
	if !res.Interval.Empty() {
		attrs = append(attrs, slog.String(logkey.Interval, res.Interval.String()))
	}
	kind := state.EventAuditPassed
	switch {
	case res.Passed():
		l.DebugContext(ctx, MsgAuditPassed, attrs...)
	case res.Blocking:
		kind = state.EventAuditFailed
		l.ErrorContext(ctx, MsgAuditFailed, append(attrs, slog.String(logkey.Error, res.Describe()))...)
	default:
		kind = state.EventAuditFailed
		l.WarnContext(ctx, MsgAuditWarned, append(attrs, slog.String(logkey.Error, res.Describe()))...)
	}
	data := map[string]any{"audit": res.Audit, "version": res.Version, "blocking": res.Blocking, "count": res.Count}
	if !res.Interval.Empty() {
		data["interval"] = res.Interval.String()
	}
	if res.Err != nil {
		data["error"] = res.Err.Error()
	}
	if res.Sample != nil {
		data["sample_columns"] = res.Sample.Columns
		rows := make([][]string, len(res.Sample.Rows))
		for i, row := range res.Sample.Rows {
			rows[i] = make([]string, len(row))
			for j, v := range row {
				rows[i][j] = formatValue(v)
			}
		}
		data["sample"] = rows
	}
	raw, err := json.Marshal(data)
	if err != nil {
		l.ErrorContext(ctx, "encoding an audit event", slog.Any(logkey.Error, err))
		return
	}
	if _, err := x.Store.AppendEvents(context.WithoutCancel(ctx), state.Event{At: x.now(), Kind: kind, Model: res.Model,
		Reason: res.Audit, Data: raw}); err != nil {
		l.ErrorContext(ctx, "recording an audit event", slog.Any(logkey.Error, err))
	}
}

// blockingFailure is the *AuditError of results' blocking failures, nil
// when there is none.
func blockingFailure(results []AuditResult) error {
	var failed []AuditResult
	for _, r := range results {
		if r.Blocking && !r.Passed() {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &AuditError{Failed: failed}
}

// clearInterval removes the rows a batch of a time-range model wrote to
// [r.Start, r.End), after a blocking audit refused them: the interval is
// not recorded, so the table holds no rows for it, as before the batch
// (what a served view shows is then a gap, never rows that failed).
func (x *Executor) clearInterval(ctx context.Context, t *Template, r interval.Range, text *model.TimeFormat) error {
	s := t.Snapshot
	p := warehouse.InsertIntervalParams{Table: t.Table, TimeColumn: s.Model.TimeColumn, Start: r.Start, End: r.End,
		Query: "SELECT * FROM " + x.Engine.QuoteTable(t.Table) + " WHERE FALSE"}
	if text != nil {
		p.Text = &warehouse.TextBounds{Start: text.Format(r.Start), End: text.Format(r.End)}
	}
	if _, err := x.Engine.InsertInterval(context.WithoutCancel(ctx), p); err != nil {
		return fmt.Errorf("removing the rows of %s %s the audit refused: %w", s.Name, r, err)
	}
	return nil
}
