package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Driver is the kind of database a connection string points at.
type Driver string

// The supported drivers.
const (
	DriverDuckDB   Driver = "duckdb"
	DriverSQLite   Driver = "sqlite"
	DriverPostgres Driver = "postgres"
	// DriverTrino is a Trino (or Starburst) cluster as the warehouse:
	// trino://user[:password]@host[:port]/catalog[?secure=true]. It is never
	// a state store.
	DriverTrino Driver = "trino"
)

// Memory is the Path of an in-memory DuckDB or SQLite database
// (duckdb://:memory:).
const Memory = ":memory:"

// Conn is a parsed connection string.
//
// For DuckDB and SQLite, Path is the database file, absolute (relative paths
// in the file are resolved against the project directory) or Memory; DSN is
// Path followed by the original "?query", if any. For PostgreSQL and Trino,
// Path is "" and DSN is the URL as written (after ${VAR} expansion), for the
// driver.
// DSN may hold a password: print String(), never DSN.
type Conn struct {
	Driver Driver
	Path   string
	DSN    string
	// Settings are DuckDB's, from gapless.yaml's warehouse_settings: set
	// only on a duckdb:// warehouse (Load refuses them on any other).
	Settings DuckDBSettings
}

// String renders the connection for logs and messages, with any password
// replaced by "xxxxx".
func (c Conn) String() string {
	if c.Driver != DriverPostgres && c.Driver != DriverTrino {
		return string(c.Driver) + "://" + c.DSN
	}
	u, err := url.Parse(c.DSN)
	if err != nil {
		return string(c.Driver) + "://(unparseable)"
	}
	return u.Redacted()
}

// ErrBadConn is wrapped by ParseConn's errors.
var ErrBadConn = errors.New("bad connection string")

// ParseConn parses a connection string: duckdb://PATH, sqlite://PATH (PATH
// may be :memory:; a SQLite one may be followed by ?options for the
// driver, a DuckDB one may not: its settings are warehouse_settings) or
// postgres://... (also postgresql://) or trino://user@host:port/catalog
// (the catalog is required). A relative PATH is resolved against
// dir. duckdb:///abs/file.duckdb names an absolute path.
//
// Errors wrap ErrBadConn and never quote the string itself, which may hold a
// password.
func ParseConn(s, dir string) (Conn, error) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(s), "://")
	if !ok {
		return Conn{}, fmt.Errorf("%w: want DRIVER://..., with DRIVER one of duckdb, sqlite, postgres, trino", ErrBadConn)
	}
	switch strings.ToLower(scheme) {
	case "duckdb":
		return fileConn(DriverDuckDB, rest, dir)
	case "sqlite", "sqlite3":
		return fileConn(DriverSQLite, rest, dir)
	case "postgres", "postgresql":
		dsn := "postgres://" + rest
		if _, err := url.Parse(dsn); err != nil {
			// url's error quotes the URL; keep only that it failed.
			return Conn{}, fmt.Errorf("%w: postgres URL does not parse", ErrBadConn)
		}
		return Conn{Driver: DriverPostgres, DSN: dsn}, nil
	case "trino":
		dsn := "trino://" + rest
		u, err := url.Parse(dsn)
		if err != nil {
			return Conn{}, fmt.Errorf("%w: trino URL does not parse", ErrBadConn)
		}
		if u.Host == "" {
			return Conn{}, fmt.Errorf("%w: trino:// needs a host: trino://user@host:8080/catalog", ErrBadConn)
		}
		if u.User == nil || u.User.Username() == "" {
			return Conn{}, fmt.Errorf("%w: trino:// needs a user, as Trino names every query's user: trino://user@%s/catalog", ErrBadConn, u.Host)
		}
		if strings.Trim(u.Path, "/") == "" || strings.Contains(strings.Trim(u.Path, "/"), "/") {
			return Conn{}, fmt.Errorf("%w: trino:// needs one catalog after the host, where the models' schemas live: trino://user@%s/iceberg", ErrBadConn, u.Host)
		}
		return Conn{Driver: DriverTrino, DSN: dsn}, nil
	default:
		return Conn{}, fmt.Errorf("%w: unknown driver %q; want duckdb, sqlite, postgres or trino", ErrBadConn, scheme)
	}
}

func fileConn(d Driver, rest, dir string) (Conn, error) {
	path, query, hasQuery := strings.Cut(rest, "?")
	if path == "" {
		return Conn{}, fmt.Errorf("%w: %s:// needs a file path (or %s)", ErrBadConn, d, Memory)
	}
	if d == DriverDuckDB && hasQuery {
		// The file path is all gapless hands DuckDB: a query would be
		// dropped without a word.
		return Conn{}, fmt.Errorf("%w: duckdb:// takes no ?options; set DuckDB's memory_limit and threads under warehouse_settings", ErrBadConn)
	}
	if path != Memory {
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		path = filepath.Clean(path)
	}
	dsn := path
	if hasQuery {
		dsn += "?" + query
	}
	return Conn{Driver: d, Path: path, DSN: dsn}, nil
}

// ErrUnsetVariable is wrapped by Expand's error for a variable that is not set
// and has no default.
var ErrUnsetVariable = errors.New("environment variable is not set")

// UnsetVariableError is Expand's error for a variable that is not set and
// has no default. It is ErrUnsetVariable (errors.Is) and names the
// variable, never a value.
type UnsetVariableError struct{ Name string }

func (e *UnsetVariableError) Error() string {
	return fmt.Sprintf("%v: ${%s} (set it, or write ${%s:-default})", ErrUnsetVariable, e.Name, e.Name)
}

// Is makes the error ErrUnsetVariable.
func (e *UnsetVariableError) Is(target error) bool { return target == ErrUnsetVariable }

// Expand replaces ${NAME} with the value of environment variable NAME, as
// returned by lookupEnv, and ${NAME:-default} with default when NAME is unset
// or empty. "$${" stands for a literal "${"; any other '$' is kept as is, so
// passwords containing '$' need no escaping. NAME is
// [A-Za-z_][A-Za-z0-9_]*. An unset variable without a default, a bad name or
// a missing '}' is an error naming the variable (never its value); an unset
// variable's is an *UnsetVariableError.
func Expand(s string, lookupEnv func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ at byte %d: missing '}'", i)
			}
			inner := s[i+2 : i+end]
			name, def, hasDef := strings.Cut(inner, ":-")
			if !validVarName(name) {
				return "", fmt.Errorf("bad variable name %q in ${...}", name)
			}
			val, ok := lookupEnv(name)
			switch {
			case (!ok || val == "") && hasDef:
				val = def
			case !ok:
				return "", &UnsetVariableError{Name: name}
			}
			b.WriteString(val)
			i += end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
