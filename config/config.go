// Package config reads a project's gapless.yaml, or, in a SQLMesh project
// without one, SQLMesh's config.yaml (see loadSQLMesh) and its
// external_models.yaml (see LoadExternalModels).
//
// The file is optional: a project without one gets the defaults. When present
// it is read strictly: an unknown key is an error that names its line and
// column and suggests the closest known key, so a typo never silently falls
// back to a default.
//
//	warehouse: duckdb://warehouse.duckdb        # or postgres://user:${PGPASSWORD}@host/db
//	warehouse_settings:                         # duckdb:// only (see DuckDBSettings)
//	  memory_limit: 2GB
//	  threads: 2
//	state: sqlite://.gapless/state.db           # or postgres://...
//	environment_ttl: 7d                         # non-prod environments expire; 12h, 7d, 2w or never
//	snapshot_ttl: 7d                            # versions no environment serves are kept; 0 or never too
//	model_defaults:
//	  dialect: duckdb
//	  cron: '@daily'
//	  start: '2024-01-01'
//	  owner: data-eng
//	  audits: ['not_null(columns := [id])']      # every model calls these audits
//	environments:
//	  prod:
//	    on_incumbent_advance: strict            # strict|trailing-gap|catch-up|replan|lock
//	    max_trailing_gap_intervals: 0
//	    max_attempts: 3                         # catch-up rounds / replans
//	  dev:
//	    ttl: 12h                                # overrides environment_ttl (never on prod)
//	variables:                                  # SQLMesh's global macro variables: @min_amount, @VAR('regions')
//	  min_amount: 10                            # strings, numbers, booleans, or lists of them
//	  regions: [eu, us]
//	before_all:                                 # SQLMesh's environment statements: once per apply and per run
//	  - CREATE TABLE IF NOT EXISTS ops.runs (env VARCHAR, at TIMESTAMP)
//	after_all:                                  # @this_env is the environment's name; no SET/USE/TEMP
//	  - INSERT INTO ops.runs VALUES (@this_env, @execution_ts)
//	github:                                     # pull requests: gapless serve, gapless github run (see GitHub)
//	  app_id: ${GAPLESS_GITHUB_APP_ID}          # with private_key_file: App authentication (serve)
//	  private_key_file: ${GAPLESS_GITHUB_KEY_FILE}
//	  token: ${GITHUB_TOKEN}                    # a plain token instead of an App (GitHub Actions)
//	  webhook_secret: ${GAPLESS_WEBHOOK_SECRET} # serve refuses to start without it
//	  repositories: [acme/analytics]            # the allowlist, owner/name
//	  api_url: https://api.github.com/          # GitHub Enterprise Server: https://ghe.example.com/api/v3/
//	  project_dir: .                            # where gapless.yaml is inside the repository
//	  prod_branch: main
//	  pr_environment_name: analytics            # PR environments are analytics_<number>
//	  pr_start: 1d                              # a PR environment backfills this far back (12h, 2w, or a date)
//	  enable_deploy_command: true               # /deploy in a PR comment
//	  command_namespace: ""                     # "#gapless" makes it #gapless/deploy
//	  deploy_on_merge: false
//	  merge_method: squash                      # merge|squash|rebase
//	  check_if_blocked_on_deploy: true
//	  invalidate_pr_environment_after_deploy: true
//
// Secrets (the github token and webhook secret, passwords in connection
// strings) are best written as ${VAR}; none is ever quoted in an error or
// printed by String.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/internal/strictyaml"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
)

// FileName is the project configuration file, at the project's root.
const FileName = "gapless.yaml"

// Default connection strings, used when gapless.yaml does not set them.
// Relative paths are resolved against the project directory.
const (
	DefaultWarehouse = "duckdb://warehouse.duckdb"
	DefaultState     = "sqlite://.gapless/state.db"
)

// Config is a loaded project configuration with every default applied.
type Config struct {
	// Dir is the project directory, absolute.
	Dir string
	// File is the path of gapless.yaml; Found says whether it exists.
	File  string
	Found bool

	Warehouse Conn
	State     Conn

	// ModelDefaults apply to every model where its file is silent.
	ModelDefaults model.Defaults

	// Environments holds per-environment settings by environment name. An
	// environment not listed gets DefaultEnvironment (see Environment).
	Environments map[string]Environment

	// EnvironmentTTL is how long a non-prod environment lives after its
	// latest promotion before `gapless janitor` removes it: environment_ttl,
	// DefaultEnvironmentTTL when absent, 0 for never. Use TTL for one
	// environment.
	EnvironmentTTL time.Duration

	// SnapshotTTL is how long `gapless janitor` keeps the table and
	// intervals of a model version no environment serves, after it was
	// last used (the promotion that replaced it, or the last activity of a
	// plan that built it), so that a revert reuses them: snapshot_ttl,
	// DefaultSnapshotTTL when absent, 0 to drop them at once, NeverExpire
	// to keep them.
	SnapshotTTL time.Duration

	// GitHub is the github: block; nil when the file has none.
	GitHub *GitHub

	// SQLMesh says the configuration is SQLMesh's config.yaml (File),
	// read because the project has no gapless.yaml.
	SQLMesh bool
	// Gateway is the SQLMesh gateway whose connections were read
	// (default_gateway, else the first); "" for gapless.yaml.
	Gateway string
	// Warnings name the settings of config.yaml gapless ignores because
	// they only describe (each at its line); Load has logged them.
	Warnings []*Error

	// Variables are the `variables:` block, SQLMesh's global macro
	// variables (@name and @VAR('name') in a model), by lower-case name:
	// string, int64, float64, bool, or []any of those (see
	// macro.VariableValue). Empty when the file has none.
	Variables map[string]any

	// BeforeAll and AfterAll are the before_all and after_all lists
	// (SQLMesh's environment statements): run once at the start and once
	// at the end of every plan apply and every run (see
	// execute.EnvironmentStatements). Each keeps its file:line.
	BeforeAll, AfterAll []model.Statement
}

// DefaultSnapshotTTL is snapshot_ttl when gapless.yaml does not set it: one
// week, as in SQLMesh.
const DefaultSnapshotTTL = 7 * 24 * time.Hour

// NeverExpire is the SnapshotTTL of snapshot_ttl: never (the largest
// Duration; it is janitor.Forever).
const NeverExpire = time.Duration(math.MaxInt64)

// DefaultEnvironmentTTL is environment_ttl when gapless.yaml does not set
// it: one week, as in SQLMesh.
const DefaultEnvironmentTTL = 7 * 24 * time.Hour

// TTL is how long the named environment lives after a promotion: 0 (never)
// for prod, else its own environments.<name>.ttl, else EnvironmentTTL.
func (c *Config) TTL(env string) time.Duration {
	if env == ProdEnvironment {
		return 0
	}
	if e, ok := c.Environments[env]; ok && e.TTL != nil {
		return *e.TTL
	}
	return c.EnvironmentTTL
}

// ProdEnvironment is the environment that never expires (snapshot.Prod).
const ProdEnvironment = snapshot.Prod

// PromotionPolicy is what promotion does when the environment's incumbent
// moved after the plan was built (see DESIGN.md and package policy).
type PromotionPolicy = promotion.Name

// The promotion policies.
const (
	PolicyStrict      = promotion.Strict
	PolicyTrailingGap = promotion.TrailingGap
	PolicyCatchUp     = promotion.CatchUp
	PolicyReplan      = promotion.Replan
	PolicyLock        = promotion.Lock
)

// Policies lists every promotion policy.
var Policies = promotion.Names

// Environment is the configuration of one environment.
type Environment struct {
	// OnIncumbentAdvance is the promotion policy; never empty after Load.
	OnIncumbentAdvance PromotionPolicy
	// MaxTrailingGapIntervals bounds the trailing gap the trailing-gap
	// policy may accept, in intervals; never negative.
	MaxTrailingGapIntervals int
	// MaxAttempts bounds catch-up rounds and replans; 0 means
	// promotion.DefaultMaxAttempts; never negative.
	MaxAttempts int
	// TTL is environments.<name>.ttl: nil when absent (the top-level
	// environment_ttl applies), 0 for never. Always nil for prod, which
	// refuses the key. Read it through Config.TTL.
	TTL *time.Duration
}

// Policy is the environment's promotion policy with its bounds.
func (e Environment) Policy() promotion.Policy {
	return promotion.Policy{Name: e.OnIncumbentAdvance, MaxTrailingGapIntervals: e.MaxTrailingGapIntervals, MaxAttempts: e.MaxAttempts}
}

// DefaultEnvironment is the configuration of an environment gapless.yaml
// does not mention: fail closed.
var DefaultEnvironment = Environment{OnIncumbentAdvance: PolicyStrict}

// Environment returns the settings of the named environment, or
// DefaultEnvironment if it is not configured.
func (c *Config) Environment(name string) Environment {
	if e, ok := c.Environments[name]; ok {
		return e
	}
	return DefaultEnvironment
}

// Error is a problem in gapless.yaml (or in another file read the same
// way, such as a source definition). Its text is "file:line:col: message",
// or "file: message" when it is not tied to a place; Key is the dotted path
// of the setting concerned.
type Error = strictyaml.Error

// Load reads <dir>/gapless.yaml, expanding ${VAR} in connection strings from
// the process environment. Without it, SQLMesh's config.yaml (or
// config.yml) is read instead, and a config.py alone is refused (wrapping
// ErrPythonConfig); with both, gapless.yaml is read and an info record says
// so, once per folder and process. No file at all yields the defaults.
func Load(dir string) (*Config, error) {
	return LoadEnv(dir, os.LookupEnv)
}

// LoadEnv is Load with an explicit environment lookup (os.LookupEnv in
// production; a map in tests). A nil lookupEnv sees no variables.
func LoadEnv(dir string, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("config: project directory %q: %w", dir, err)
	}
	file := filepath.Join(abs, FileName)
	src, err := os.ReadFile(file)
	found := true
	if errors.Is(err, fs.ErrNotExist) {
		src, found, err = nil, false, nil
	}
	if err != nil {
		return nil, &Error{File: file, Msg: "cannot read: " + err.Error(), Err: err}
	}
	if found {
		notePrecedence(abs)
	} else {
		cfg := &Config{Dir: abs, File: file, Environments: map[string]Environment{},
			EnvironmentTTL: DefaultEnvironmentTTL, SnapshotTTL: DefaultSnapshotTTL}
		ok, err := loadSQLMeshOrPython(cfg, lookupEnv)
		if err != nil {
			return nil, err
		}
		if ok {
			return cfg, nil
		}
	}
	l := &loader{strictyaml.New(file)}
	raw := &fileConfig{}
	if err := l.Decode(src, raw, FileName); err != nil {
		return nil, withoutSource(err)
	}
	cfg := &Config{Dir: abs, File: file, Found: found, Environments: map[string]Environment{},
		EnvironmentTTL: DefaultEnvironmentTTL, SnapshotTTL: DefaultSnapshotTTL}
	if err := l.build(cfg, raw, lookupEnv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// fileConfig mirrors gapless.yaml. Its yaml tags are the one list of known
// keys: the strict key check reads them by reflection.
type fileConfig struct {
	Warehouse         *string                    `yaml:"warehouse"`
	WarehouseSettings *fileWarehouseSettings     `yaml:"warehouse_settings"`
	State             *string                    `yaml:"state"`
	EnvironmentTTL    *string                    `yaml:"environment_ttl"`
	SnapshotTTL       *string                    `yaml:"snapshot_ttl"`
	ModelDefaults     fileModelDefaults          `yaml:"model_defaults"`
	Environments      map[string]fileEnvironment `yaml:"environments"`
	GitHub            *fileGitHub                `yaml:"github"`
	Variables         map[string]any             `yaml:"variables"`
	BeforeAll         []string                   `yaml:"before_all"`
	AfterAll          []string                   `yaml:"after_all"`
}

type fileModelDefaults struct {
	Dialect string `yaml:"dialect"`
	Cron    string `yaml:"cron"`
	Start   string `yaml:"start"`
	Owner   string `yaml:"owner"`
	// Audits are audit calls every model makes (SQLMesh's
	// model_defaults.audits), each written as in a MODEL block.
	Audits []string `yaml:"audits"`
}

type fileEnvironment struct {
	OnIncumbentAdvance      string  `yaml:"on_incumbent_advance"`
	MaxTrailingGapIntervals *int    `yaml:"max_trailing_gap_intervals"`
	MaxAttempts             *int    `yaml:"max_attempts"`
	TTL                     *string `yaml:"ttl"`
}

// loader is the strict decoder of gapless.yaml: it knows where every key
// and value is, so that errors found after decoding still point at the file.
type loader struct{ *strictyaml.Doc }

// build validates the decoded file and fills cfg.
func (l *loader) build(cfg *Config, raw *fileConfig, lookupEnv func(string) (string, bool)) error {
	conns := []struct {
		key string
		raw *string
		def string
		dst *Conn
	}{
		{"warehouse", raw.Warehouse, DefaultWarehouse, &cfg.Warehouse},
		{"state", raw.State, DefaultState, &cfg.State},
	}
	for _, c := range conns {
		s := c.def
		if c.raw != nil {
			expanded, err := Expand(*c.raw, lookupEnv)
			if err != nil {
				return l.ValueErr(c.key, err, "%s", c.key)
			}
			s = expanded
		}
		conn, err := ParseConn(s, cfg.Dir)
		if err != nil {
			return l.ValueErr(c.key, err, "%s", c.key)
		}
		*c.dst = conn
	}

	vars, err := l.variables(raw.Variables)
	if err != nil {
		return err
	}
	cfg.Variables = vars
	if cfg.BeforeAll, err = l.statements(cfg.Dir, "before_all", raw.BeforeAll); err != nil {
		return err
	}
	if cfg.AfterAll, err = l.statements(cfg.Dir, "after_all", raw.AfterAll); err != nil {
		return err
	}

	settings, err := l.warehouseSettings(raw.WarehouseSettings, cfg.Warehouse)
	if err != nil {
		return err
	}
	cfg.Warehouse.Settings = settings

	if raw.EnvironmentTTL != nil {
		ttl, err := l.ttl("environment_ttl", *raw.EnvironmentTTL)
		if err != nil {
			return err
		}
		cfg.EnvironmentTTL = ttl
	}

	if raw.SnapshotTTL != nil {
		ttl, err := l.snapshotTTL("snapshot_ttl", *raw.SnapshotTTL)
		if err != nil {
			return err
		}
		cfg.SnapshotTTL = ttl
	}

	if err := l.modelDefaults(cfg, raw.ModelDefaults); err != nil {
		return err
	}

	names := make([]string, 0, len(raw.Environments))
	for name := range raw.Environments {
		names = append(names, name)
	}
	sort.Strings(names) // report problems in a stable order
	for _, name := range names {
		env, err := l.environment(name, raw.Environments[name])
		if err != nil {
			return err
		}
		cfg.Environments[name] = env
	}

	gh, err := l.gitHub(cfg, raw.GitHub, lookupEnv)
	if err != nil {
		return err
	}
	cfg.GitHub = gh
	return nil
}

// modelDefaults checks md (model_defaults) and sets cfg.ModelDefaults.
func (l *loader) modelDefaults(cfg *Config, md fileModelDefaults) error {
	if md.Dialect != "" {
		d, err := model.ParseDialect(md.Dialect)
		if err != nil {
			return l.ValueErr("model_defaults.dialect", err, "model_defaults.dialect")
		}
		cfg.ModelDefaults.Dialect = d
	}
	if md.Cron != "" {
		sched, err := cron.Parse(md.Cron)
		if err == nil {
			_, err = sched.Unit()
		}
		if err != nil {
			return l.ValueErr("model_defaults.cron", err, "model_defaults.cron")
		}
		cfg.ModelDefaults.Cron = strings.TrimSpace(md.Cron)
	}
	if md.Start != "" {
		t, err := model.ParseTime(md.Start)
		if err != nil {
			return l.ValueErr("model_defaults.start", err, "model_defaults.start")
		}
		cfg.ModelDefaults.Start = t
	}
	cfg.ModelDefaults.Owner = md.Owner
	return l.defaultAudits(cfg, md.Audits)
}

// defaultAudits parses model_defaults.audits into cfg.ModelDefaults.Audits,
// each call placed at its entry in the file, so that an audit that does not
// exist or is called wrongly is reported there when a model binds it.
func (l *loader) defaultAudits(cfg *Config, calls []string) error {
	const key = "model_defaults.audits"
	var entries []ast.Node
	if seq, ok := l.ValNode[key].(*ast.SequenceNode); ok {
		entries = seq.Values
	}
	for i, text := range calls {
		pos := l.ValPos[key]
		if i < len(entries) {
			if tk := entries[i].GetToken(); tk != nil && tk.Position != nil {
				pos = strictyaml.Pos{Line: tk.Position.Line, Col: tk.Position.Column}
			}
		}
		r, err := model.ParseAuditCall(model.Pos{File: l.File, Line: pos.Line, Col: pos.Col}, text)
		if err != nil {
			msg := err.Error()
			var me *model.Error
			if errors.As(err, &me) {
				msg = me.Msg
			}
			return l.ErrAt(key, pos, nil, "%s: entry %d (%q): %s", key, i+1, text, msg)
		}
		cfg.ModelDefaults.Audits = append(cfg.ModelDefaults.Audits, r)
	}

	return nil
}

// withoutSource drops the YAML parser's own error from a decoding error:
// its text quotes the lines around the problem, which may hold a secret
// written in the file. The message (file, line, column, what is wrong)
// stays: its first line, for a parser error that had no position and was
// kept whole.
func withoutSource(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Err != nil {
		c := *e
		c.Err = nil
		c.Msg, _, _ = strings.Cut(c.Msg, "\n")
		return &c
	}
	return err
}

func (l *loader) environment(name string, raw fileEnvironment) (Environment, error) {
	key := "environments." + name
	if err := snapshot.CheckEnvironmentName(name); err != nil {
		e := l.ErrAt(key, l.KeyPos[key], nil, "%v", err)
		e.Err = err
		return Environment{}, e
	}
	env := DefaultEnvironment
	if raw.OnIncumbentAdvance != "" {
		p, err := ParsePolicy(raw.OnIncumbentAdvance)
		if err != nil {
			return Environment{}, l.ValueErr(key+".on_incumbent_advance", err, "%s.on_incumbent_advance", key)
		}
		env.OnIncumbentAdvance = p
	}
	var err error
	if env.MaxTrailingGapIntervals, err = l.count(key+".max_trailing_gap_intervals", raw.MaxTrailingGapIntervals, env.MaxTrailingGapIntervals); err != nil {
		return Environment{}, err
	}
	if env.MaxAttempts, err = l.count(key+".max_attempts", raw.MaxAttempts, env.MaxAttempts); err != nil {
		return Environment{}, err
	}
	if raw.TTL != nil {
		ttlKey := key + ".ttl"
		if name == ProdEnvironment {
			return Environment{}, l.ErrAt(ttlKey, l.KeyPos[ttlKey], nil,
				"%s: prod never expires; remove ttl (environment_ttl and ttl apply to the other environments)", ttlKey)
		}
		ttl, err := l.ttl(ttlKey, *raw.TTL)
		if err != nil {
			return Environment{}, err
		}
		env.TTL = &ttl
	}
	return env, nil
}

// ttl reads the lifetime at key (see ParseTTL). The value must be written
// as a string: a bare number has no unit.
func (l *loader) ttl(key, raw string) (time.Duration, error) {
	if node := l.ValNode[key]; node != nil && node.Type() != ast.StringType {
		e := l.ValueErr(key, nil, "%s: want a duration such as 12h, 7d, 2w or never, got %s", key, node.String())
		e.Err = ErrBadTTL
		return 0, e
	}
	d, err := ParseTTL(raw)
	if err != nil {
		return 0, l.ValueErr(key, err, "%s", key)
	}
	return d, nil
}

// snapshotTTL reads the snapshot TTL at key (see ParseSnapshotTTL): a
// string, or the bare number 0.
func (l *loader) snapshotTTL(key, raw string) (time.Duration, error) {
	node := l.ValNode[key]
	if node != nil && node.Type() == ast.IntegerType && strings.TrimSpace(raw) == "0" {
		return 0, nil
	}
	if node != nil && node.Type() != ast.StringType {
		e := l.ValueErr(key, nil, "%s: want a duration such as 12h, 7d, 2w, 0 or never, got %s", key, node.String())
		e.Err = ErrBadTTL
		return 0, e
	}
	d, err := ParseSnapshotTTL(raw)
	if err != nil {
		return 0, l.ValueErr(key, err, "%s", key)
	}
	return d, nil
}

// ParseSnapshotTTL reads a snapshot TTL: what ParseTTL reads, except that
// "never" is NeverExpire and a zero duration ("0", "0s", "0d") is 0, which
// drops an unused version at once.
func ParseSnapshotTTL(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "never") {
		return NeverExpire, nil
	}
	if t == "0" || t == "0d" || t == "0w" {
		return 0, nil
	}
	if d, err := time.ParseDuration(t); err == nil && d == 0 {
		return 0, nil
	}
	d, err := ParseTTL(t)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want a duration such as 12h, 7d, 2w, 0 (drop at once) or never", ErrBadTTL, s)
	}
	return d, nil
}

// maxTTL bounds a lifetime (100 years), so that days never overflow.
const maxTTL = 100 * 365 * 24 * time.Hour

// ErrBadTTL is wrapped by ParseTTL's error.
var ErrBadTTL = errors.New("bad duration")

// ParseTTL reads an environment lifetime: "never" (0), a whole number of
// days or weeks ("7d", "2w"), or a Go duration of hours, minutes or seconds
// ("12h", "90m", "1h30m"). It must be positive: write never, not 0.
func ParseTTL(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "never") {
		return 0, nil
	}
	bad := func() error {
		return fmt.Errorf("%w %q: want a positive duration such as 12h, 7d, 2w, or never", ErrBadTTL, s)
	}
	var d time.Duration
	if n := len(t); n > 1 && (t[n-1] == 'd' || t[n-1] == 'w') {
		k, err := strconv.ParseInt(t[:n-1], 10, 32)
		day := 24 * time.Hour
		if t[n-1] == 'w' {
			day *= 7
		}
		if err != nil || k > int64(maxTTL/day) {
			return 0, bad()
		}
		d = time.Duration(k) * day
	} else {
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			return 0, bad()
		}
	}
	if d <= 0 || d > maxTTL {
		return 0, bad()
	}
	return d, nil
}

// count reads a whole, non-negative number at key, or keeps def when the
// key is absent.
func (l *loader) count(key string, raw *int, def int) (int, error) {
	if raw == nil {
		return def, nil
	}
	if node := l.ValNode[key]; node != nil && node.Type() != ast.IntegerType {
		// go-yaml would silently truncate 1.5 to 1.
		return 0, l.ValueErr(key, nil, "%s: want a whole number, got %s", key, node.String())
	}
	if *raw < 0 {
		return 0, l.ValueErr(key, nil, "%s must not be negative, got %d", key, *raw)
	}
	return *raw, nil
}

// ErrUnknownPolicy is wrapped by ParsePolicy's error.
var ErrUnknownPolicy = promotion.ErrUnknown

// ParsePolicy returns the policy named s (case-insensitive).
func ParsePolicy(s string) (PromotionPolicy, error) { return promotion.Parse(s) }

// variables checks the variables: block: names are macro names (letters,
// digits, underscores, not starting with a digit; case-insensitive, so two
// names differing only in case clash) and values are strings, numbers,
// booleans or lists of them. An error names the entry's line.
func (l *loader) variables(raw map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		key := "variables." + k
		if !validVariableName(k) {
			return nil, l.KeyErr(key, nil, "variables: %q is not a macro variable name (letters, digits and underscores, not starting with a digit)", k)
		}
		lower := strings.ToLower(k)
		if _, dup := out[lower]; dup {
			return nil, l.KeyErr(key, nil, "variables: %s is defined twice (names are case-insensitive)", lower)
		}
		v, err := macro.VariableValue(raw[k])
		if err != nil {
			return nil, l.KeyErr(key, nil, "variables: %s: %v", k, err)
		}
		out[lower] = v
	}
	return out, nil
}

func validVariableName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
