// Package trino is the Trino warehouse engine: warehouse.Engine over the
// official Go client (github.com/trinodb/trino-go-client, the database/sql
// driver "trino"), with the models' tables held in Iceberg.
//
// Trino has no multi-statement transactions on Iceberg: each statement is
// one atomic Iceberg commit, and that shapes every invariant below.
//
// Invariants this engine keeps, beyond those of warehouse.Engine:
//
//   - Every write is exactly one statement, hence one Iceberg commit:
//     InsertInterval is one MERGE that deletes [Start, End) and inserts the
//     query's in-range rows; MergeByKey is one MERGE that also refuses a
//     duplicate key (Trino's fail() inside the statement); ReplaceTable is
//     one CREATE OR REPLACE TABLE ... AS; InsertRows is one INSERT (or, for
//     a seed too large for one statement, one INSERT ... SELECT from a
//     staging table that is then dropped). A reader sees the table before
//     or after the commit, never between, and a statement that fails
//     commits nothing.
//   - Writers of one table take turns inside one Engine (a lock per table
//     name), and a commit that Iceberg refuses because another writer (in
//     another process) committed first is retried a bounded number of
//     times with backoff (see retry.go). Idempotent statements only: an
//     interval replace, a merge and a whole-table replace give the same
//     outcome when run again.
//   - Names are always quoted ("" doubled) and checked before any SQL is
//     sent (see names.go). Trino folds every schema, table, view and column
//     name to lower case, quoted or not: "MixedCase" and "mixedcase" are one
//     object and Columns returns "mixedcase" (Capabilities.CaseSensitiveNames
//     is false). Names the Iceberg catalog cannot hold faithfully are
//     refused with warehouse.ErrInvalidIdentifier, never half-created.
//   - Sessions run with the time zone UTC: timestamps without a zone are
//     read and compared as UTC wall-clock time, and interval bounds are
//     rendered in UTC.
//   - Values read back are plain Go values (see Query); values written are
//     bound parameters or literals rendered by the engine itself.
//   - CreateOrReplaceViews cannot be atomic (Capabilities.AtomicViews is
//     false): it checks the whole batch first and then replaces one view
//     at a time, in order (see views.go).
package trino

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	trinoclient "github.com/trinodb/trino-go-client/trino"

	"github.com/gapless-dev/gapless/warehouse"
)

// Dialect is what (*Engine).Dialect returns.
const Dialect = "trino"

// DefaultSource is the client name (X-Trino-Source) the engine's queries
// carry unless the URL sets source=.
const DefaultSource = "gapless"

// Engine is the Trino warehouse engine. It is safe for concurrent use.
type Engine struct {
	db        *sql.DB
	transport *http.Transport
	// object names the warehouse in errors not about one table: the URL
	// without its password.
	object string
	closed atomic.Bool

	// locks makes the writers of one table (and the creators of one
	// schema) take turns inside this Engine.
	locks nameLocks
	// standIns serialises the descriptions that create stand-ins, so that
	// one never reads (or drops) another's.
	standIns sync.Mutex

	// retry bounds the retries of a refused Iceberg commit; retried
	// counts them.
	retry   retryPolicy
	retried atomic.Int64

	// failViewAt, when positive, makes the failViewAt-th replace of every
	// CreateOrReplaceViews batch fail before it runs (a test hook: see
	// export_test.go).
	failViewAt atomic.Int64
	// maxStatement, when positive, replaces maxStatementBytes (a test
	// hook: see export_test.go).
	maxStatement atomic.Int64
}

var (
	_ warehouse.Engine      = (*Engine)(nil)
	_ warehouse.RowReplacer = (*Engine)(nil)
)

// Config is a parsed warehouse URL.
type Config struct {
	// Server is the coordinator's base URL (http:// or https://, host and
	// port), without credentials.
	Server   string
	User     string
	Password string
	Catalog  string
	// Schema is the session's default schema ("" for none); the engine
	// itself always qualifies names.
	Schema string
	// Source is the client name the queries carry.
	Source string
	// Redacted is the URL as given, without its password, for messages.
	Redacted string
}

// ParseURL reads gapless's Trino warehouse URL:
//
//	trino://user[:password]@host[:port]/catalog[?secure=true&source=...&schema=...]
//
// The user and the catalog are required. secure=true talks https (the
// port defaults to 443), otherwise http (the port defaults to 8080, Trino's
// own default). A password requires secure=true: the Trino client refuses
// to send one over http, and so does this parser, with the reason. Any
// other parameter is refused by name. Errors never show the password.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("parsing the Trino URL %s: not a URL", redactRaw(raw))
	}
	redacted := u.Redacted()
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("the Trino URL %s: %s", redacted, fmt.Sprintf(format, args...))
	}
	if u.Scheme != "trino" {
		return bad("must start with trino:// (for example trino://user@host:8080/catalog)")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("names no host (write trino://user@host:8080/catalog)")
	}
	c := Config{Redacted: redacted, Source: DefaultSource}
	if u.User != nil {
		c.User = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	if c.User == "" {
		return bad("names no user: Trino needs one (write trino://user@%s/...)", u.Host)
	}
	path := strings.TrimPrefix(u.Path, "/")
	if path == "" {
		return bad("names no catalog: write it as the path, trino://user@%s/<catalog>", u.Host)
	}
	if strings.Contains(strings.TrimSuffix(path, "/"), "/") {
		return bad("the path must be exactly one catalog name, got %q (a default schema goes in ?schema=)", u.Path)
	}
	c.Catalog = strings.TrimSuffix(path, "/")
	secure := false
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "secure":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("secure=%q is not true or false", v)
			}
			secure = b
		case "source":
			if v == "" {
				return bad("source= is empty")
			}
			c.Source = v
		case "schema":
			c.Schema = v
		default:
			return bad("unknown parameter %q (known: secure, source, schema)", key)
		}
	}
	scheme, port := "http", "8080"
	if secure {
		scheme, port = "https", "443"
	}
	if c.Password != "" && !secure {
		return bad("has a password but talks plain http: add ?secure=true (the Trino client sends a password over https only)")
	}
	host := u.Hostname()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return bad("port %q is not a port number", p)
		}
		port = p
	}
	c.Server = scheme + "://" + net.JoinHostPort(host, port)
	return c, nil
}

// redactRaw hides whatever looks like a password in a string url.Parse
// refused.
func redactRaw(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	head := raw[:at]
	if i := strings.Index(head, "://"); i >= 0 {
		if colon := strings.Index(head[i+3:], ":"); colon >= 0 {
			return head[:i+3+colon] + ":xxxxx" + raw[at:]
		}
	}
	return raw
}

// clientConfig is the Go client's configuration for c: the session's time
// zone is UTC, queries with arguments are sent as EXECUTE IMMEDIATE (the
// statement in the request body, not in a header that a long model query
// would overflow), and HTTP goes through the engine's own transport, which
// Close releases.
func (c Config) clientConfig(transport *http.Transport) *trinoclient.Config {
	u, _ := url.Parse(c.Server) // built by ParseURL
	if c.Password != "" {
		u.User = url.UserPassword(c.User, c.Password)
	} else {
		u.User = url.User(c.User)
	}
	return &trinoclient.Config{
		ServerURI:              u.String(),
		Source:                 c.Source,
		Catalog:                c.Catalog,
		Schema:                 c.Schema,
		TimeZone:               "UTC",
		DisableExplicitPrepare: true,
		HTTPClient:             &http.Client{Transport: transport},
	}
}

// Open connects to the Trino cluster at rawURL (see ParseURL) and checks
// that the catalog answers. The engine's queries carry the client name
// "gapless" (or source=).
func Open(ctx context.Context, rawURL string) (*Engine, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, &warehouse.Error{Op: "open", Object: redactRaw(rawURL), Err: err}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	connector, err := trinoclient.NewConnector(cfg.clientConfig(transport))
	if err != nil {
		transport.CloseIdleConnections()
		return nil, &warehouse.Error{Op: "open", Object: cfg.Redacted, Err: err}
	}
	db := sql.OpenDB(connector)
	// A Trino connection is a set of HTTP headers: keeping a few idle
	// costs nothing and saves nothing either; the HTTP keep-alives are the
	// transport's.
	db.SetMaxIdleConns(16)
	e := &Engine{db: db, transport: transport, object: cfg.Redacted, retry: defaultRetry}
	const probe = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'information_schema'"
	var n int64
	if err := db.QueryRowContext(ctx, probe).Scan(&n); err != nil {
		_ = e.Close()
		return nil, &warehouse.Error{Op: "open", Object: cfg.Redacted, SQL: probe, Err: fmt.Errorf("the catalog %q does not answer: %w", cfg.Catalog, err)}
	}
	return e, nil
}

// DB exposes the connection pool, for tests and tools that need a raw
// statement. Statements run through it bypass the engine's checks.
func (e *Engine) DB() *sql.DB { return e.db }

// Dialect returns "trino".
func (e *Engine) Dialect() string { return Dialect }

// Capabilities: views change one at a time (no multi-statement
// transactions), names fold to lower case, and there is no Ingester.
func (e *Engine) Capabilities() warehouse.Capabilities {
	return warehouse.Capabilities{AtomicViews: false, CaseSensitiveNames: false, Ingest: false}
}

// QuoteIdent quotes one identifier: double quotes around it, embedded
// double quotes doubled. Trino folds the name to lower case all the same.
func (e *Engine) QuoteIdent(name string) string { return quoteIdent(name) }

// QuoteTable quotes schema.name; an empty schema renders the bare quoted
// name, resolved in the session's schema.
func (e *Engine) QuoteTable(t warehouse.Table) string { return quoteTable(t) }

// Close releases the connection pool and the HTTP connections. It is safe
// to call more than once; every call after the first returns nil, and
// every other method then fails.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	err := e.db.Close()
	e.transport.CloseIdleConnections()
	return err
}

// errClosed is what every method returns after Close.
var errClosed = errors.New("the engine is closed")

// begin is how every operation starts: a closed engine and a cancelled
// context fail before anything is sent.
func (e *Engine) begin(ctx context.Context) error {
	if e.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}

// fail builds the engine's error. A nil err yields nil. An error that is
// already a *warehouse.Error is returned as it is.
func fail(op, object, sql string, err error) error {
	if err == nil {
		return nil
	}
	var we *warehouse.Error
	if errors.As(err, &we) {
		return err
	}
	var se *stmtError
	if errors.As(err, &se) && sql == "" {
		sql = se.sql
	}
	return &warehouse.Error{Op: op, Object: object, SQL: sql, Err: err}
}

// stmtError carries the SQL of the statement that failed inside an
// operation up to the operation's *warehouse.Error.
type stmtError struct {
	sql string
	err error
}

func (s *stmtError) Error() string { return s.err.Error() }
func (s *stmtError) Unwrap() error { return s.err }

// exec runs one statement that returns no rows worth reading (DDL, DML)
// and returns its update count (-1 when the statement has none). A
// failure carries the SQL.
func (e *Engine) exec(ctx context.Context, sql string) (int64, error) {
	res, err := e.db.ExecContext(ctx, sql)
	if err != nil {
		return 0, &stmtError{sql: sql, err: serverError(err)}
	}
	n, err := res.RowsAffected()
	if err != nil {
		return -1, nil //nolint:nilerr // DDL has no update count; the statement itself succeeded
	}
	return n, nil
}

// queryRows runs one statement and reads every row as strings or values
// through scan.
func (e *Engine) queryRows(ctx context.Context, sql string, scan func(*sql.Rows) error) error {
	rows, err := e.db.QueryContext(ctx, sql)
	if err != nil {
		return &stmtError{sql: sql, err: serverError(err)}
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return &stmtError{sql: sql, err: err}
		}
	}
	if err := rows.Err(); err != nil {
		return &stmtError{sql: sql, err: serverError(err)}
	}
	return nil
}

// serverError keeps err (for errors.As on *trino.ErrTrino and errors.Is on
// context errors) and turns the client's "query failed" wrapper into the
// server's own words.
func serverError(err error) error {
	te := trinoError(err)
	if te == nil {
		return err
	}
	return &ServerError{Name: te.ErrorName, Message: te.Message, err: err}
}

// ServerError is a statement Trino refused: its error name (the stable
// code, e.g. TABLE_NOT_FOUND, ICEBERG_COMMIT_ERROR) and message. It wraps
// the client's error, so errors.As finds *trino.ErrTrino too.
type ServerError struct {
	Name    string
	Message string
	err     error
}

func (s *ServerError) Error() string { return s.Message + " (" + s.Name + ")" }
func (s *ServerError) Unwrap() error { return s.err }

// trinoError is the server's error inside err, if any.
func trinoError(err error) *trinoclient.ErrTrino {
	var te *trinoclient.ErrTrino
	if errors.As(err, &te) {
		return te
	}
	return nil
}

// errorName is the server's error name inside err ("" if none).
func errorName(err error) string {
	if te := trinoError(err); te != nil {
		return te.ErrorName
	}
	return ""
}

// errorMessage is the server's message inside err ("" if none).
func errorMessage(err error) string {
	if te := trinoError(err); te != nil {
		return te.Message
	}
	return ""
}
