package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/internal/strictyaml"
)

// SQLMesh's configuration files, read at the project root when it has no
// gapless.yaml: config.yaml (or config.yml). A config.py is refused:
// gapless runs no Python.
const (
	SQLMeshFile       = "config.yaml"
	SQLMeshFileAlt    = "config.yml"
	SQLMeshPythonFile = "config.py"
)

// ErrPythonConfig is wrapped by the error of a project configured only by
// SQLMesh's config.py.
var ErrPythonConfig = errors.New("a Python configuration (config.py) is not supported")

// ErrUnsupported is wrapped by the error of a SQLMesh setting gapless does
// not support and cannot ignore, because ignoring it would change the rows
// the project serves.
var ErrUnsupported = errors.New("not supported by gapless")

// loggedPrecedence remembers the folders whose "gapless.yaml wins over
// config.yaml" note was logged, so that it is said once per process.
var loggedPrecedence sync.Map

// sqlmeshConfigFile returns the SQLMesh configuration file at dir
// (config.yaml, else config.yml), or "" when there is none.
func sqlmeshConfigFile(dir string) string {
	for _, name := range []string{SQLMeshFile, SQLMeshFileAlt} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// notePrecedence logs, once per folder and process, that gapless.yaml is
// read and SQLMesh's config file at dir is not.
func notePrecedence(dir string) {
	other := sqlmeshConfigFile(dir)
	if other == "" {
		return
	}
	if _, done := loggedPrecedence.LoadOrStore(dir, true); done {
		return
	}
	slog.Info("gapless.yaml is the configuration; "+filepath.Base(other)+" (SQLMesh's) is not read",
		logkey.Path, filepath.Join(dir, FileName))
}

// envVarRE is SQLMesh's way of reading an environment variable in its YAML
// configuration, a Jinja call: {{ env_var('NAME') }} or
// {{ env_var('NAME', 'default') }}.
var envVarRE = regexp.MustCompile(`\{\{-?\s*env_var\(\s*(?:'([^']*)'|"([^"]*)")\s*(?:,\s*(?:'([^']*)'|"([^"]*)")\s*)?\)\s*-?\}\}`)

// renderEnvVars replaces SQLMesh's {{ env_var(...) }} calls in src before
// it is parsed, as SQLMesh renders the file with Jinja first. An unset
// variable without a default is an error naming it and its line (never a
// value); a value holding a line break is refused, so that lines keep their
// numbers.
func renderEnvVars(file string, src []byte, lookupEnv func(string) (string, bool)) ([]byte, error) {
	var firstErr error
	out := envVarRE.ReplaceAllFunc(src, func(m []byte) []byte {
		if firstErr != nil {
			return m
		}
		sub := envVarRE.FindSubmatch(m)
		name := string(sub[1]) + string(sub[2])
		val, ok := lookupEnv(name)
		if !ok {
			if sub[3] == nil && sub[4] == nil {
				line := lineOf(src, m)
				firstErr = &Error{File: file, Line: line, Col: 1, Msg: fmt.Sprintf("env_var('%s'): %v", name, &UnsetVariableError{Name: name}), Err: &UnsetVariableError{Name: name}}
				return m
			}
			val = string(sub[3]) + string(sub[4])
		}
		if strings.ContainsAny(val, "\r\n") {
			firstErr = &Error{File: file, Line: lineOf(src, m), Col: 1, Msg: fmt.Sprintf("env_var('%s'): the value holds a line break", name)}
			return m
		}
		return []byte(val)
	})
	return out, firstErr
}

// lineOf is the 1-based line of the first occurrence of m in src.
func lineOf(src, m []byte) int {
	i := strings.Index(string(src), string(m))
	if i < 0 {
		return 0
	}
	return strings.Count(string(src[:i]), "\n") + 1
}

// sqlmeshFile mirrors SQLMesh's config.yaml: every root key SQLMesh
// documents. Those typed `any` are read only to be named (see
// sqlmeshUnsupported).
type sqlmeshFile struct {
	Gateways              map[string]sqlmeshGateway `yaml:"gateways"`
	DefaultGateway        string                    `yaml:"default_gateway"`
	DefaultConnection     map[string]any            `yaml:"default_connection"`
	DefaultTestConnection map[string]any            `yaml:"default_test_connection"`
	DefaultScheduler      map[string]any            `yaml:"default_scheduler"`
	ModelDefaults         map[string]any            `yaml:"model_defaults"`
	Variables             map[string]any            `yaml:"variables"`
	SnapshotTTL           *string                   `yaml:"snapshot_ttl"`
	EnvironmentTTL        *string                   `yaml:"environment_ttl"`
	BeforeAll             []string                  `yaml:"before_all"`
	AfterAll              []string                  `yaml:"after_all"`

	Project                         any `yaml:"project"`
	Format                          any `yaml:"format"`
	UI                              any `yaml:"ui"`
	Linter                          any `yaml:"linter"`
	Users                           any `yaml:"users"`
	NotificationTargets             any `yaml:"notification_targets"`
	LogLimit                        any `yaml:"log_limit"`
	DisableAnonymizedAnalytics      any `yaml:"disable_anonymized_analytics"`
	CICDBot                         any `yaml:"cicd_bot"`
	Plan                            any `yaml:"plan"`
	Run                             any `yaml:"run"`
	Janitor                         any `yaml:"janitor"`
	Migration                       any `yaml:"migration"`
	CacheDir                        any `yaml:"cache_dir"`
	InferPythonDependencies         any `yaml:"infer_python_dependencies"`
	PhysicalSchemaOverride          any `yaml:"physical_schema_override"`
	PhysicalSchemaMapping           any `yaml:"physical_schema_mapping"`
	PhysicalTableNamingConvention   any `yaml:"physical_table_naming_convention"`
	GatewayManagedVirtualLayer      any `yaml:"gateway_managed_virtual_layer"`
	DefaultTargetEnvironment        any `yaml:"default_target_environment"`
	EnvironmentSuffixTarget         any `yaml:"environment_suffix_target"`
	EnvironmentCatalogMapping       any `yaml:"environment_catalog_mapping"`
	VirtualEnvironmentMode          any `yaml:"virtual_environment_mode"`
	IgnorePatterns                  any `yaml:"ignore_patterns"`
	TimeColumnFormat                any `yaml:"time_column_format"`
	EnvVars                         any `yaml:"env_vars"`
	Dbt                             any `yaml:"dbt"`
	Loader                          any `yaml:"loader"`
	LoaderKwargs                    any `yaml:"loader_kwargs"`
	ModelNaming                     any `yaml:"model_naming"`
	Signals                         any `yaml:"signals"`
	ModelDefaultsPerGatewayUnneeded any `yaml:"gateway_model_defaults"`
}

type sqlmeshGateway struct {
	Connection      map[string]any `yaml:"connection"`
	StateConnection map[string]any `yaml:"state_connection"`
	TestConnection  map[string]any `yaml:"test_connection"`
	Scheduler       map[string]any `yaml:"scheduler"`
	StateSchema     any            `yaml:"state_schema"`
	Variables       map[string]any `yaml:"variables"`
	ModelDefaults   any            `yaml:"model_defaults"`
}

// severity is what gapless does with a SQLMesh key it does not support: a
// warning when the key only describes (how SQLMesh's own tools look or
// behave), an error when ignoring it would change the rows served.
type severity int

const (
	describes severity = iota
	changesResults
	// supported marks a connection key gapless reads.
	supported
)

// sqlmeshUnsupported lists the root keys gapless does not read, with what
// ignoring each means.
var sqlmeshUnsupported = map[string]struct {
	sev severity
	why string
}{
	"project":                          {describes, "gapless has one project per folder"},
	"format":                           {describes, "formatting options of sqlmesh format"},
	"ui":                               {describes, "SQLMesh's browser UI"},
	"linter":                           {describes, "gapless does not run SQLMesh's linter"},
	"users":                            {describes, "SQLMesh's user list"},
	"notification_targets":             {describes, "SQLMesh's notifications"},
	"log_limit":                        {describes, "SQLMesh's log files"},
	"disable_anonymized_analytics":     {describes, "gapless sends no analytics"},
	"cicd_bot":                         {describes, "SQLMesh's CI/CD bot; gapless's is the github: block of gapless.yaml"},
	"plan":                             {describes, "SQLMesh's plan defaults; pass gapless plan's flags"},
	"run":                              {describes, "SQLMesh's run options"},
	"janitor":                          {describes, "SQLMesh's janitor options"},
	"migration":                        {describes, "SQLMesh's state migrations"},
	"cache_dir":                        {describes, "gapless keeps its cache in .gapless/"},
	"infer_python_dependencies":        {describes, "gapless runs no Python models"},
	"physical_schema_override":         {describes, "gapless names its physical schemas itself"},
	"physical_schema_mapping":          {describes, "gapless names its physical schemas itself"},
	"physical_table_naming_convention": {describes, "gapless names its physical tables itself"},
	"gateway_managed_virtual_layer":    {describes, "gapless has one gateway"},
	"default_target_environment":       {describes, "name the environment on gapless plan's command line"},
	"environment_suffix_target":        {changesResults, "gapless serves an environment as views in <schema>__<env>, the default"},
	"environment_catalog_mapping":      {changesResults, "gapless serves environments in the warehouse's own catalog"},
	"virtual_environment_mode":         {changesResults, "gapless always builds environments virtually (full mode)"},
	"ignore_patterns":                  {changesResults, "gapless would load the files it names"},
	"time_column_format":               {changesResults, "gapless reads time columns as dates and timestamps"},
	"env_vars":                         {changesResults, "set the variables in the environment gapless runs in"},
	"dbt":                              {changesResults, "gapless does not load dbt projects"},
	"loader":                           {changesResults, "gapless loads SQLMesh's native layout only"},
	"loader_kwargs":                    {changesResults, "gapless loads SQLMesh's native layout only"},
	"model_naming":                     {changesResults, "name every model in its MODEL block"},
	"signals":                          {changesResults, "gapless does not evaluate signals"},
	"gateway_model_defaults":           {changesResults, "write model_defaults at the root"},
}

// sqlmeshModelDefaultKeys lists the model_defaults keys gapless does not
// read (dialect, cron, start, owner, audits, and kind VIEW, it does), with what
// ignoring each means.
var sqlmeshModelDefaultKeys = map[string]struct {
	sev severity
	why string
}{
	"table_format":          {describes, "defaults are not applied; write table_format in each model (Trino only)"},
	"storage_format":        {describes, "defaults are not applied; write storage_format in each model (Trino only)"},
	"physical_properties":   {describes, "defaults are not applied; write physical_properties in each model, where gapless applies it"},
	"virtual_properties":    {describes, "view properties are not passed on"},
	"on_destructive_change": {describes, "gapless plans every schema change itself, showing it in the plan"},
	"on_additive_change":    {describes, "gapless plans every schema change itself, showing it in the plan"},
	"optimize_query":        {describes, "gapless runs the query as written"},
	"formatting":            {describes, "sqlmesh format's option"},
	"batch_concurrency":     {describes, "gapless schedules batches itself"},
	"validate_query":        {describes, "gapless checks queries when it loads them"},
	"ignore_rules":          {describes, "gapless does not run SQLMesh's linter"},
	"description":           {describes, "a description only"},
	"kind":                  {changesResults, "gapless's default kind is VIEW; set the kind in each model"},
	"session_properties":    {changesResults, "session properties are not set"},
	"allow_partials":        {changesResults, "gapless computes complete intervals only"},
	"interval_unit":         {changesResults, "gapless derives the interval from the cron"},
	"enabled":               {changesResults, "set enabled in each model"},
	"pre_statements":        {changesResults, "write the statements in each model"},
	"post_statements":       {changesResults, "write the statements in each model"},
	"on_virtual_update":     {changesResults, "write the statements in each model"},
	"grants":                {changesResults, "gapless grants nothing"},
	"signals":               {changesResults, "gapless does not evaluate signals"},
}

// loadSQLMesh reads SQLMesh's config.yaml (at file) into cfg: the warehouse
// and state of the selected gateway, model_defaults, variables, and the
// before_all and after_all statements (see Config.BeforeAll). Keys
// gapless does not support are named with their line: a warning (in
// cfg.Warnings, and logged) when they only describe, an error wrapping
// ErrUnsupported when ignoring them would change results.
func loadSQLMesh(cfg *Config, file string, src []byte, lookupEnv func(string) (string, bool)) error {
	src, err := renderEnvVars(file, src, lookupEnv)
	if err != nil {
		return err
	}
	l := &loader{strictyaml.New(file)}
	raw := &sqlmeshFile{}
	if err := l.Decode(src, raw, filepath.Base(file)); err != nil {
		return withoutSource(err)
	}
	s := &sqlmeshLoader{loader: l, cfg: cfg, lookupEnv: lookupEnv}

	for _, key := range sortedKeys(l.KeyPos) {
		if strings.Contains(key, ".") {
			continue
		}
		if u, ok := sqlmeshUnsupported[key]; ok {
			if err := s.unsupported(key, u.sev, u.why); err != nil {
				return err
			}
		}
	}

	gwName, gw, err := s.gateway(raw)
	if err != nil {
		return err
	}
	cfg.Gateway = gwName
	gwKey := "gateways." + gwName

	conn, connKey := gw.Connection, gwKey+".connection"
	if conn == nil && raw.DefaultConnection != nil {
		conn, connKey = raw.DefaultConnection, "default_connection"
	}
	cfg.Warehouse, err = ParseConn(DefaultWarehouse, cfg.Dir)
	if err != nil {
		return err
	}
	if conn != nil {
		if cfg.Warehouse, err = s.conn(connKey, conn, false); err != nil {
			return err
		}
	}
	cfg.State, err = ParseConn(DefaultState, cfg.Dir)
	if err != nil {
		return err
	}
	if gw.StateConnection != nil {
		key := gwKey + ".state_connection"
		if typ, _ := gw.StateConnection["type"].(string); strings.EqualFold(typ, "duckdb") {
			s.warn(key, "%s: gapless keeps its state in SQLite or PostgreSQL, not DuckDB: it is in %s (SQLMesh's state is never read)", key, cfg.State)
		} else if cfg.State, err = s.conn(key, gw.StateConnection, true); err != nil {
			return err
		}
	}
	for _, tc := range []struct {
		key  string
		conn map[string]any
	}{{gwKey + ".test_connection", gw.TestConnection}, {"default_test_connection", raw.DefaultTestConnection}} {
		if typ, _ := tc.conn["type"].(string); tc.conn != nil && !strings.EqualFold(typ, "duckdb") {
			s.warn(tc.key, "%s: gapless runs unit tests on in-memory DuckDB, not %s", tc.key, typ)
		}
	}
	for _, sc := range []struct {
		key string
		m   map[string]any
	}{{gwKey + ".scheduler", gw.Scheduler}, {"default_scheduler", raw.DefaultScheduler}} {
		if typ, _ := sc.m["type"].(string); sc.m != nil && !strings.EqualFold(typ, "builtin") {
			if err := s.unsupported(sc.key, changesResults, "gapless schedules runs itself (gapless run, gapless serve)"); err != nil {
				return err
			}
		}
	}
	if gw.StateSchema != nil {
		s.warn(gwKey+".state_schema", "%s: gapless keeps its state in %s", gwKey+".state_schema", cfg.State)
	}
	if gw.ModelDefaults != nil {
		if err := s.unsupported(gwKey+".model_defaults", changesResults, "write model_defaults at the root"); err != nil {
			return err
		}
	}

	if err := s.modelDefaults(raw.ModelDefaults); err != nil {
		return err
	}

	// Gateway variables override the root's, as in SQLMesh.
	vars, err := l.variables(raw.Variables)
	if err != nil {
		return err
	}
	gwVars, err := l.variables(gw.Variables)
	if err != nil {
		return err
	}
	for k, v := range gwVars {
		vars[k] = v
	}
	cfg.Variables = vars
	if cfg.BeforeAll, err = l.statements(cfg.Dir, "before_all", raw.BeforeAll); err != nil {
		return err
	}
	if cfg.AfterAll, err = l.statements(cfg.Dir, "after_all", raw.AfterAll); err != nil {
		return err
	}

	for _, t := range []struct {
		key string
		raw *string
		dst *timeDst
	}{{"environment_ttl", raw.EnvironmentTTL, &timeDst{&cfg.EnvironmentTTL, false}}, {"snapshot_ttl", raw.SnapshotTTL, &timeDst{&cfg.SnapshotTTL, true}}} {
		if t.raw == nil {
			continue
		}
		v := sqlmeshDuration(*t.raw)
		var d, perr = ParseTTL(v)
		if t.dst.snapshot {
			d, perr = ParseSnapshotTTL(v)
		}
		if perr != nil {
			return l.ValueErr(t.key, perr, "%s: want SQLMesh's \"in 1 week\" or gapless's 7d", t.key)
		}
		*t.dst.d = d
	}

	for _, w := range cfg.Warnings {
		slog.Warn(w.Error(), logkey.Path, file)
	}
	return nil
}

type timeDst struct {
	d        *time.Duration
	snapshot bool
}

// sqlmeshDurationRE is SQLMesh's TTL: "in 1 week", "in 2 days", "1 hour".
var sqlmeshDurationRE = regexp.MustCompile(`(?i)^\s*(?:in\s+)?(\d+)\s*(week|day|hour|minute)s?\s*$`)

// sqlmeshDuration turns SQLMesh's "in N unit(s)" into gapless's form (Nw,
// Nd, Nh, Nm); anything else is returned as is.
func sqlmeshDuration(s string) string {
	m := sqlmeshDurationRE.FindStringSubmatch(s)
	if m == nil {
		return s
	}
	return m[1] + map[string]string{"week": "w", "day": "d", "hour": "h", "minute": "m"}[strings.ToLower(m[2])]
}

type sqlmeshLoader struct {
	*loader
	cfg       *Config
	lookupEnv func(string) (string, bool)
}

// warn records a warning at key's line.
func (s *sqlmeshLoader) warn(key, format string, args ...any) {
	s.cfg.Warnings = append(s.cfg.Warnings, s.KeyErr(key, nil, format, args...))
}

// unsupported names key as not supported: a warning, or an error wrapping
// ErrUnsupported when ignoring it would change results.
func (s *sqlmeshLoader) unsupported(key string, sev severity, why string) error {
	if sev == describes {
		s.warn(key, "%s is not supported by gapless and is ignored: %s", key, why)
		return nil
	}
	e := s.KeyErr(key, nil, "%s is not supported by gapless, and ignoring it would change results: %s", key, why)
	e.Err = ErrUnsupported
	return e
}

// gateway selects the gateway: default_gateway, else the first in the
// file, as SQLMesh does. A project without gateways gets an empty one.
func (s *sqlmeshLoader) gateway(raw *sqlmeshFile) (string, sqlmeshGateway, error) {
	if len(raw.Gateways) == 0 {
		if raw.DefaultGateway != "" {
			return "", sqlmeshGateway{}, s.ValueErr("default_gateway", nil, "default_gateway: %s is not a gateway (the file has no gateways:)", raw.DefaultGateway)
		}
		return "", sqlmeshGateway{}, nil
	}
	names := make([]string, 0, len(raw.Gateways))
	for n := range raw.Gateways {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return s.KeyPos["gateways."+names[i]].Line < s.KeyPos["gateways."+names[j]].Line
	})
	if raw.DefaultGateway == "" {
		return names[0], raw.Gateways[names[0]], nil
	}
	for _, n := range names {
		if strings.EqualFold(n, raw.DefaultGateway) {
			return n, raw.Gateways[n], nil
		}
	}
	return "", sqlmeshGateway{}, s.ValueErr("default_gateway", nil, "default_gateway: %s is not a gateway; gateways: %s", raw.DefaultGateway, strings.Join(names, ", "))
}

// conn builds a connection from a SQLMesh connection block at key: DuckDB
// (database, a file relative to the project; in memory is refused) or
// PostgreSQL (host, port, user, password, database, sslmode). For state,
// only PostgreSQL is accepted here.
func (s *sqlmeshLoader) conn(key string, m map[string]any, state bool) (Conn, error) {
	typ, _ := m["type"].(string)
	str := func(k string) (string, error) {
		v, ok := m[k]
		if !ok || v == nil {
			return "", nil
		}
		var out string
		switch x := v.(type) {
		case string:
			out = x
		case uint64, int64, int, float64, bool:
			out = fmt.Sprint(x)
		default:
			return "", s.ValueErr(key+"."+k, nil, "%s.%s: want a string", key, k)
		}
		exp, err := Expand(out, s.lookupEnv)
		if err != nil {
			return "", s.ValueErr(key+"."+k, err, "%s.%s", key, k)
		}
		return exp, nil
	}
	var known map[string]severity
	var c Conn
	switch strings.ToLower(typ) {
	case "duckdb":
		if state {
			return Conn{}, s.ValueErr(key+".type", nil, "%s: gapless keeps its state in SQLite or PostgreSQL", key)
		}
		db, err := str("database")
		if err != nil {
			return Conn{}, err
		}
		if db == "" || db == Memory {
			// SQLMesh's default: in memory, with its state in the same
			// database. gapless's state outlives the command, and would
			// record tables that vanished with it.
			return Conn{}, s.KeyErr(key, nil, "%s: a DuckDB database in memory is gone when the command ends, while gapless's state (%s) is kept; set database: to a file, such as database: db.db", key, DefaultState)
		}
		if c, err = ParseConn("duckdb://"+db, s.cfg.Dir); err != nil {
			return Conn{}, s.ValueErr(key+".database", err, "%s.database", key)
		}
		known = map[string]severity{"concurrent_tasks": describes, "register_comments": describes, "pre_ping": describes,
			"pretty_sql": describes, "schema_differ_overrides": describes, "catalog_type_overrides": describes, "connector_config": changesResults, "extensions": changesResults, "catalogs": changesResults,
			"secrets": changesResults, "filesystems": changesResults, "token": changesResults}
		if cc, ok := m["connector_config"].(map[string]any); ok {
			if err := s.connectorConfig(key+".connector_config", cc, &c); err != nil {
				return Conn{}, err
			}
			delete(known, "connector_config")
		}
	case "postgres", "postgresql":
		fields := map[string]string{}
		for _, k := range []string{"host", "port", "user", "password", "database", "sslmode", "application_name", "connect_timeout"} {
			v, err := str(k)
			if err != nil {
				return Conn{}, err
			}
			fields[k] = v
		}
		if fields["host"] == "" {
			return Conn{}, s.KeyErr(key, nil, "%s: a postgres connection needs a host", key)
		}
		u := url.URL{Scheme: "postgres", Host: fields["host"], Path: "/" + fields["database"]}
		if fields["port"] != "" {
			if _, err := strconv.Atoi(fields["port"]); err != nil {
				return Conn{}, s.ValueErr(key+".port", nil, "%s.port: want a number", key)
			}
			u.Host += ":" + fields["port"]
		}
		switch {
		case fields["password"] != "":
			u.User = url.UserPassword(fields["user"], fields["password"])
		case fields["user"] != "":
			u.User = url.User(fields["user"])
		}
		q := url.Values{}
		for _, k := range []string{"sslmode", "application_name", "connect_timeout"} {
			if fields[k] != "" {
				q.Set(k, fields[k])
			}
		}
		u.RawQuery = q.Encode()
		var err error
		if c, err = ParseConn(u.String(), s.cfg.Dir); err != nil {
			return Conn{}, s.KeyErr(key, err, "%s", key)
		}
		known = map[string]severity{"concurrent_tasks": describes, "register_comments": describes, "pre_ping": describes,
			"pretty_sql": describes, "keepalives_idle": describes, "role": changesResults}
		for _, k := range []string{"host", "port", "user", "password", "database", "sslmode", "application_name", "connect_timeout"} {
			known[k] = supported
		}
	case "":
		return Conn{}, s.KeyErr(key, nil, "%s: type is missing: want duckdb or postgres", key)
	default:
		return Conn{}, s.ValueErr(key+".type", ErrUnsupported, "%s.type: %s: gapless reads duckdb and postgres connections from config.yaml (write gapless.yaml for trino)", key, typ)
	}
	for _, k := range sortedMapKeys(m) {
		if k == "type" || k == "database" {
			continue
		}
		sev, ok := known[k]
		switch {
		case !ok:
			if err := s.unsupported(key+"."+k, changesResults, "gapless does not know this "+typ+" connection setting"); err != nil {
				return Conn{}, err
			}
		case sev == describes || sev == changesResults:
			if err := s.unsupported(key+"."+k, sev, "a SQLMesh connection option"); err != nil {
				return Conn{}, err
			}
		}
	}
	return c, nil
}

// connectorConfig reads DuckDB's connector_config: memory_limit and
// threads, gapless's warehouse_settings; any other setting is an error.
func (s *sqlmeshLoader) connectorConfig(key string, m map[string]any, c *Conn) error {
	for _, k := range sortedMapKeys(m) {
		switch k {
		case "memory_limit":
			v, err := ParseMemoryLimit(fmt.Sprint(m[k]))
			if err != nil {
				return s.ValueErr(key+"."+k, err, "%s.%s", key, k)
			}
			c.Settings.MemoryLimit = v
		case "threads":
			n, err := strconv.Atoi(fmt.Sprint(m[k]))
			if err != nil || n < 1 {
				return s.ValueErr(key+"."+k, nil, "%s.%s: want at least 1", key, k)
			}
			c.Settings.Threads = n
		default:
			if err := s.unsupported(key+"."+k, changesResults, "gapless passes DuckDB memory_limit and threads only"); err != nil {
				return err
			}
		}
	}
	return nil
}

// modelDefaults reads model_defaults: dialect, cron, start and owner as
// gapless.yaml's; kind only as VIEW (gapless's default, and SQLMesh's);
// the rest are named (see sqlmeshModelDefaultKeys).
func (s *sqlmeshLoader) modelDefaults(m map[string]any) error {
	var md fileModelDefaults
	for _, k := range sortedMapKeys(m) {
		key := "model_defaults." + k
		v := m[k]
		switch k {
		case "dialect", "cron", "start", "owner":
			str := scalarString(s.ValNode[key], v)
			switch k {
			case "dialect":
				md.Dialect = str
			case "cron":
				md.Cron = str
			case "start":
				md.Start = str
			case "owner":
				md.Owner = str
			}
			continue
		case "kind":
			if kind, ok := v.(string); ok && strings.EqualFold(strings.TrimSpace(kind), "VIEW") {
				continue
			}
		case "audits":
			calls, ok := v.([]any)
			if !ok {
				return s.ValueErr(key, nil, "%s: want a list of audit calls, such as [\"not_null(columns := [id])\"]", key)
			}
			for i, c := range calls {
				text, ok := c.(string)
				if !ok {
					return s.ValueErr(key, nil, "%s: entry %d: want an audit call written as a string, got %v", key, i+1, c)
				}
				md.Audits = append(md.Audits, text)
			}
			continue
		}
		u, ok := sqlmeshModelDefaultKeys[k]
		if !ok {
			known := []string{"audits", "dialect", "cron", "start", "owner"}
			for n := range sqlmeshModelDefaultKeys {
				known = append(known, n)
			}
			sort.Strings(known)
			return s.unknownModelDefault(key, k, known)
		}
		if err := s.unsupported(key, u.sev, u.why); err != nil {
			return err
		}
	}
	return s.applyModelDefaults(md)
}

func (s *sqlmeshLoader) unknownModelDefault(key, k string, known []string) error {
	return s.KeyErr(key, nil, "unknown key %s in model_defaults (keys: %s)", k, strings.Join(known, ", "))
}

// scalarString is a scalar's text as written (a YAML date stays
// 2024-01-01, not a time.Time).
func scalarString(n ast.Node, v any) string {
	if n != nil {
		if tok := n.GetToken(); tok != nil && n.Type() != ast.MappingType && n.Type() != ast.SequenceType {
			return tok.Value
		}
	}
	return fmt.Sprint(v)
}

// applyModelDefaults checks md as gapless.yaml's model_defaults.
func (s *sqlmeshLoader) applyModelDefaults(md fileModelDefaults) error {
	return s.loader.modelDefaults(s.cfg, md)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedMapKeys(m map[string]any) []string { return sortedKeys(m) }

// loadSQLMeshOrPython reads SQLMesh's configuration at dir into cfg when
// gapless.yaml is absent: config.yaml/config.yml, or the refusal of a
// config.py. It reports whether a SQLMesh file was read.
func loadSQLMeshOrPython(cfg *Config, lookupEnv func(string) (string, bool)) (bool, error) {
	if file := sqlmeshConfigFile(cfg.Dir); file != "" {
		src, err := os.ReadFile(file)
		if err != nil {
			return false, &Error{File: file, Msg: "cannot read: " + err.Error(), Err: err}
		}
		cfg.File, cfg.Found, cfg.SQLMesh = file, true, true
		return true, loadSQLMesh(cfg, file, src, lookupEnv)
	}
	py := filepath.Join(cfg.Dir, SQLMeshPythonFile)
	if _, err := os.Stat(py); err == nil {
		return false, &Error{File: py, Msg: "gapless runs no Python: write the configuration as config.yaml (SQLMesh's YAML form) or gapless.yaml", Err: ErrPythonConfig}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, &Error{File: py, Msg: "cannot read: " + err.Error(), Err: err}
	}
	return false, nil
}
