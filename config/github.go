package config

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/internal/strictyaml"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
)

// GitHub is gapless.yaml's github: block: how `gapless serve` and
// `gapless github run` talk to GitHub and what they do with pull requests.
//
//	github:
//	  app_id: ${GAPLESS_GITHUB_APP_ID}              # with private_key_file: App authentication (serve)
//	  private_key_file: ${GAPLESS_GITHUB_KEY_FILE}  # relative to the project folder
//	  token: ${GITHUB_TOKEN}                        # a plain token instead of an App (GitHub Actions)
//	  webhook_secret: ${GAPLESS_WEBHOOK_SECRET}     # serve refuses to start without it
//	  repositories: [acme/analytics]                # the allowlist, owner/name
//	  api_url: https://api.github.com/              # GitHub Enterprise Server: https://ghe.example.com/api/v3/
//	  project_dir: .                                # where gapless.yaml is inside the repository
//	  prod_branch: main
//	  pr_environment_name: analytics                # PR environments are analytics_<number>
//	  pr_start: 1d                                  # a PR environment backfills this far back (or a date)
//	  enable_deploy_command: true                   # /deploy in a PR comment
//	  command_namespace: ""                         # "#gapless" makes the command #gapless/deploy
//	  deploy_on_merge: false
//	  merge_method: squash                          # merge, squash or rebase, after a /deploy
//	  check_if_blocked_on_deploy: true
//	  invalidate_pr_environment_after_deploy: true
//	  merge_gate:                                   # no PR merges while a deploy changes its target
//	    environments: [prod]                        # [] turns the gate off
//	    wait_for: rendered                          # rendered | recorded (for GitHub outages)
//	    wait: 2m                                    # how long a deploy waits for its holds
//
// Every string value expands ${VAR} and ${VAR:-default} (see Expand). A
// variable that is not set does not fail the load, since most commands
// never talk to GitHub: the key is left empty and remembered, and Require
// names it, with the variable, for the command that needs it. app_id,
// private_key_file, token and webhook_secret, when absent, read
// ${GAPLESS_GITHUB_APP_ID}, ${GAPLESS_GITHUB_KEY_FILE}, ${GITHUB_TOKEN} and
// ${GAPLESS_WEBHOOK_SECRET}.
//
// Invariant: the token and the webhook secret never appear in an error, in
// String, GoString, LogValue or MarshalJSON (they are Secrets), and the
// private key is read only by PrivateKey, whose errors name its file.
type GitHub struct {
	// AppID is the GitHub App's id; 0 when not set.
	AppID int64
	// PrivateKeyFile is the App's private key (PEM), absolute; "" when not
	// set. Read it with PrivateKey.
	PrivateKeyFile string
	// Token is a plain token (GitHub Actions' GITHUB_TOKEN, a personal
	// token) used instead of an App; empty when not set.
	Token Secret
	// WebhookSecret signs webhook deliveries (X-Hub-Signature-256); empty
	// when not set (serve refuses to start then).
	WebhookSecret Secret
	// Repositories is the allowlist, owner/name, lower-cased, sorted,
	// without duplicates. Empty allows none (see Allows).
	Repositories []string
	// APIURL is GitHub's REST API root, ending in "/".
	APIURL string
	// ProjectDir is where gapless.yaml is inside the repository: a clean,
	// slash-separated relative path, "." for the repository's root.
	ProjectDir string
	// ProdBranch is the branch prod is deployed from.
	ProdBranch string
	// PREnvironmentName is the prefix of pull-request environments
	// (<prefix>_<number>), sanitized (SanitizeEnvironmentPrefix); by default
	// the first repository's name, and "pr" without repositories.
	PREnvironmentName string
	// PRStart is how far back a pull-request environment backfills.
	PRStart PRStart
	// EnableDeployCommand turns on /deploy (DeployCommand) in PR comments.
	EnableDeployCommand bool
	// CommandNamespace prefixes the commands: "#gapless" makes /deploy
	// #gapless/deploy. "" for none.
	CommandNamespace string
	// DeployOnMerge deploys prod when a pull request merges into
	// ProdBranch (instead of, or as well as, /deploy).
	DeployOnMerge bool
	// MergeMethod is how the bot merges a pull request it deployed.
	MergeMethod codehost.MergeMethod
	// CheckIfBlockedOnDeploy refuses /deploy on a pull request GitHub
	// reports blocked (branch protection, required reviews).
	CheckIfBlockedOnDeploy bool
	// InvalidatePREnvironmentAfterDeploy invalidates a pull request's
	// environment once it is deployed to prod.
	InvalidatePREnvironmentAfterDeploy bool
	// MergeGate is the merge gate (design invariant 4).
	MergeGate MergeGate

	// file is gapless.yaml, valPos where each key's value is in it, and
	// unset which key read which unset variable: for Require's errors.
	file   string
	valPos map[string]strictyaml.Pos
	unset  map[string]string
}

// MergeGate is github.merge_gate: which environments no pull request may
// merge into while a deploy changes them, and what a deploy waits for.
type MergeGate struct {
	// Environments are the gated environments, sorted (default [prod]);
	// empty turns the gate off.
	Environments []string
	// WaitFor is what a deploy waits for before it changes a gated
	// environment: "rendered" (the holds shown on GitHub, the default) or
	// "recorded" (only stored: for GitHub outages).
	WaitFor string
	// Wait bounds that wait (default 2m).
	Wait time.Duration
}

// Gated reports whether env is merge-gated.
func (m MergeGate) Gated(env string) bool { return slices.Contains(m.Environments, env) }

// Merge gate modes (MergeGate.WaitFor).
const (
	WaitForRendered = "rendered"
	WaitForRecorded = "recorded"
)

// ParseWaitFor reads a merge gate mode.
func ParseWaitFor(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case WaitForRendered:
		return WaitForRendered, nil
	case WaitForRecorded:
		return WaitForRecorded, nil
	}
	return "", fmt.Errorf("unknown merge gate mode %q: want rendered or recorded", s)
}

// The github: defaults.
const (
	DefaultMergeGateWait   = 2 * time.Minute
	DefaultGitHubAPIURL    = "https://api.github.com/"
	DefaultProdBranch      = "main"
	DefaultPRStart         = 24 * time.Hour
	DefaultMergeMethod     = codehost.MergeSquash
	DefaultPREnvironmentOf = "pr" // the prefix when nothing names one
)

// Variables read by github: keys the file does not write.
var gitHubEnvDefaults = map[string]string{
	"app_id":           "GAPLESS_GITHUB_APP_ID",
	"private_key_file": "GAPLESS_GITHUB_KEY_FILE",
	"token":            "GITHUB_TOKEN",
	"webhook_secret":   "GAPLESS_WEBHOOK_SECRET",
}

// Secret is a credential read from gapless.yaml. It prints as "xxxxx"
// (or "" when empty) through fmt, slog and encoding/json; Reveal returns it.
type Secret string

// redacted is what a set Secret prints as.
const redacted = "xxxxx"

// Reveal returns the secret itself: call it only where it is used.
func (s Secret) Reveal() string { return string(s) }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s == "" }

// String implements fmt.Stringer, redacted.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer (%#v), redacted.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue implements slog.LogValuer, redacted.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes the secret redacted.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText writes the secret redacted (encoding.TextMarshaler, which
// some encoders prefer).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// PRStart is how far back a pull-request environment backfills: Ago before
// the execution time, or from At. Exactly one is set.
type PRStart struct {
	Ago time.Duration
	At  time.Time
}

// From is where the backfill of a pull-request environment planned at exec
// starts: exec - Ago, or At.
func (s PRStart) From(exec time.Time) time.Time {
	if !s.At.IsZero() {
		return s.At
	}
	return exec.Add(-s.Ago)
}

// String is the setting as gapless.yaml writes it: "1d", "12h", or the
// date.
func (s PRStart) String() string {
	if !s.At.IsZero() {
		if s.At.Equal(s.At.Truncate(24 * time.Hour)) {
			return s.At.UTC().Format(time.DateOnly)
		}
		return s.At.UTC().Format(time.RFC3339)
	}
	day := 24 * time.Hour
	switch {
	case s.Ago > 0 && s.Ago%(7*day) == 0:
		return strconv.FormatInt(int64(s.Ago/(7*day)), 10) + "w"
	case s.Ago > 0 && s.Ago%day == 0:
		return strconv.FormatInt(int64(s.Ago/day), 10) + "d"
	}
	out := s.Ago.String() // "12h0m0s": drop the zero tails
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// ErrBadPRStart is wrapped by ParsePRStart's error.
var ErrBadPRStart = errors.New("bad pr_start")

// ParsePRStart reads pr_start: a positive duration back from the
// execution time ("12h", "1d", "2w", "90m", as ParseTTL reads them, never
// excepted) or an absolute time ("2024-01-01", "2024-01-01T06:00:00Z", as
// model start times are written).
func ParsePRStart(s string) (PRStart, error) {
	t := strings.TrimSpace(s)
	if !strings.EqualFold(t, "never") {
		if d, err := ParseTTL(t); err == nil {
			return PRStart{Ago: d}, nil
		}
	}
	if at, err := model.ParseTime(t); err == nil {
		return PRStart{At: at}, nil
	}
	return PRStart{}, fmt.Errorf("%w %q: want a duration back from now such as 12h, 1d or 2w, or a date such as 2024-01-01", ErrBadPRStart, s)
}

// Allows reports whether repo (owner/name, any case) is in the allowlist.
// An empty allowlist allows none.
func (g *GitHub) Allows(repo string) bool {
	_, ok := slices.BinarySearch(g.Repositories, strings.ToLower(strings.TrimSpace(repo)))
	return ok
}

// UsesApp reports whether gapless authenticates as a GitHub App (app_id and
// private_key_file set) rather than with Token.
func (g *GitHub) UsesApp() bool { return g.AppID != 0 && g.PrivateKeyFile != "" }

// DeployCommand is the comment that asks for a deploy: "/deploy", or
// "<command_namespace>/deploy"; "" when enable_deploy_command is false.
func (g *GitHub) DeployCommand() string {
	if !g.EnableDeployCommand {
		return ""
	}
	return g.CommandNamespace + "/deploy"
}

// ErrMissingGitHubSetting is wrapped by Require's error.
var ErrMissingGitHubSetting = errors.New("missing github setting")

// Require returns an error naming the first of keys (github: keys, such as
// "webhook_secret", "repositories" or "app_id") that is empty, and what
// needs it (what, e.g. "gapless serve"): where the key is written and the
// variable it reads when that is not set, or that it is absent. It never
// says a value. Nil when every key is set.
func (g *GitHub) Require(what string, keys ...string) error {
	for _, k := range keys {
		if !g.empty(k) {
			continue
		}
		full := "github." + k
		v, fromVar := g.unset[k]
		pos, written := g.valPos[k]
		var e *Error
		switch {
		case fromVar && written:
			e = &Error{File: g.file, Line: pos.Line, Col: pos.Col, Key: full,
				Msg: fmt.Sprintf("%s: %s requires it, and ${%s} is not set", full, what, v)}
		case fromVar:
			e = &Error{File: g.file, Key: full,
				Msg: fmt.Sprintf("%s: %s requires it: set it in the github block, or set ${%s}", full, what, v)}
		case written:
			e = &Error{File: g.file, Line: pos.Line, Col: pos.Col, Key: full,
				Msg: fmt.Sprintf("%s: %s requires it, and it is empty", full, what)}
		default:
			e = &Error{File: g.file, Key: full, Msg: fmt.Sprintf("%s: %s requires it; set it in the github block", full, what)}
		}
		e.Err = ErrMissingGitHubSetting
		return e
	}
	return nil
}

// empty reports whether the github: key k holds nothing.
func (g *GitHub) empty(k string) bool {
	switch k {
	case "app_id":
		return g.AppID == 0
	case "private_key_file":
		return g.PrivateKeyFile == ""
	case "token":
		return g.Token.IsZero()
	case "webhook_secret":
		return g.WebhookSecret.IsZero()
	case "repositories":
		return len(g.Repositories) == 0
	case "api_url":
		return g.APIURL == ""
	case "project_dir":
		return g.ProjectDir == ""
	case "prod_branch":
		return g.ProdBranch == ""
	case "pr_environment_name":
		return g.PREnvironmentName == ""
	case "command_namespace":
		return g.CommandNamespace == ""
	case "merge_method":
		return g.MergeMethod == ""
	}
	return false // booleans and pr_start always hold a value
}

// ErrBadPrivateKey is wrapped by PrivateKey's error when the file is not a
// PEM private key.
var ErrBadPrivateKey = errors.New("not a PEM private key")

// PrivateKey reads the App's private key from PrivateKeyFile. Its errors
// name the file, never its content.
func (g *GitHub) PrivateKey() ([]byte, error) {
	if g.PrivateKeyFile == "" {
		if err := g.Require("reading the App's private key", "private_key_file"); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(g.PrivateKeyFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, below
		}
		return nil, fmt.Errorf("github.private_key_file %s: cannot read: %w", g.PrivateKeyFile, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || !strings.Contains(block.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("github.private_key_file %s: %w (want the .pem file GitHub gave for the App)", g.PrivateKeyFile, ErrBadPrivateKey)
	}
	return b, nil
}

// String describes the settings on one line with the token and the
// webhook secret redacted.
func (g GitHub) String() string {
	auth := "none"
	switch {
	case g.UsesApp():
		auth = fmt.Sprintf("app %d (key %s)", g.AppID, g.PrivateKeyFile)
	case !g.Token.IsZero():
		auth = "token " + g.Token.String()
	}
	return fmt.Sprintf("github{auth: %s, webhook_secret: %q, repositories: [%s], api_url: %s, project_dir: %s, prod_branch: %s, "+
		"pr_environment_name: %s, pr_start: %s, enable_deploy_command: %t, command_namespace: %q, deploy_on_merge: %t, "+
		"merge_method: %s, check_if_blocked_on_deploy: %t, invalidate_pr_environment_after_deploy: %t}",
		auth, g.WebhookSecret.String(), strings.Join(g.Repositories, ", "), g.APIURL, g.ProjectDir, g.ProdBranch,
		g.PREnvironmentName, g.PRStart, g.EnableDeployCommand, g.CommandNamespace, g.DeployOnMerge,
		g.MergeMethod, g.CheckIfBlockedOnDeploy, g.InvalidatePREnvironmentAfterDeploy)
}

// GoString is String, so that %#v redacts too.
func (g GitHub) GoString() string { return g.String() }

// LogValue implements slog.LogValuer: the settings as String writes
// them, secrets redacted.
func (g GitHub) LogValue() slog.Value { return slog.StringValue(g.String()) }

// SanitizeEnvironmentPrefix makes s a prefix of environment names that
// snapshot.CheckEnvironmentName accepts once "_<number>" follows, as
// SQLMesh sanitizes pr_environment_name: lower-cased, every character
// outside [a-z0-9_] replaced by '_', runs of '_' collapsed to one, '_'
// trimmed from both ends, "pr_" put first when it would not start with a
// letter, at most 40 bytes, and "pr" when nothing is left.
func SanitizeEnvironmentPrefix(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			r = '_'
		}
		if r == '_' && strings.HasSuffix(b.String(), "_") {
			continue
		}
		b.WriteRune(r)
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		return DefaultPREnvironmentOf
	}
	if out[0] < 'a' || out[0] > 'z' {
		out = DefaultPREnvironmentOf + "_" + out
	}
	const maxPrefix = 40
	if len(out) > maxPrefix {
		out = strings.TrimRight(out[:maxPrefix], "_")
	}
	return out
}

// fileGitHub mirrors the github: block. Strings are read as written and
// expanded afterwards (a number is read as its text).
type fileGitHub struct {
	AppID                              *string        `yaml:"app_id"`
	PrivateKeyFile                     *string        `yaml:"private_key_file"`
	Token                              *string        `yaml:"token"`
	WebhookSecret                      *string        `yaml:"webhook_secret"`
	Repositories                       *[]string      `yaml:"repositories"`
	APIURL                             *string        `yaml:"api_url"`
	ProjectDir                         *string        `yaml:"project_dir"`
	ProdBranch                         *string        `yaml:"prod_branch"`
	PREnvironmentName                  *string        `yaml:"pr_environment_name"`
	PRStart                            *string        `yaml:"pr_start"`
	EnableDeployCommand                *bool          `yaml:"enable_deploy_command"`
	CommandNamespace                   *string        `yaml:"command_namespace"`
	DeployOnMerge                      *bool          `yaml:"deploy_on_merge"`
	MergeMethod                        *string        `yaml:"merge_method"`
	CheckIfBlockedOnDeploy             *bool          `yaml:"check_if_blocked_on_deploy"`
	InvalidatePREnvironmentAfterDeploy *bool          `yaml:"invalidate_pr_environment_after_deploy"`
	MergeGate                          *fileMergeGate `yaml:"merge_gate"`
}

// fileMergeGate mirrors github.merge_gate.
type fileMergeGate struct {
	Environments *[]string `yaml:"environments"`
	WaitFor      *string   `yaml:"wait_for"`
	Wait         *string   `yaml:"wait"`
}

// repoRE is owner/name as GitHub allows them: an owner of letters, digits
// and single hyphens; a name of letters, digits, '.', '-' and '_' (not "."
// or "..").
var repoRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*/[a-z0-9._-]+$`)

// branchRE is a branch name: no spaces, control characters or the
// characters git refuses in ref names.
var branchRE = regexp.MustCompile(`^[^\s~^:?*\[\\\x00-\x1f\x7f]+$`)

// gitHub reads the github: block (nil when absent, or null). Errors quote
// values as written, never what a variable expanded to, and never the
// token or the webhook secret.
func (l *loader) gitHub(cfg *Config, raw *fileGitHub, lookupEnv func(string) (string, bool)) (*GitHub, error) {
	if raw == nil {
		return nil, nil
	}
	g := &GitHub{
		APIURL: DefaultGitHubAPIURL, ProjectDir: ".", ProdBranch: DefaultProdBranch,
		PRStart: PRStart{Ago: DefaultPRStart}, EnableDeployCommand: true, MergeMethod: DefaultMergeMethod,
		CheckIfBlockedOnDeploy: true, InvalidatePREnvironmentAfterDeploy: true,
		MergeGate: MergeGate{Environments: []string{"prod"}, WaitFor: WaitForRendered, Wait: DefaultMergeGateWait},
		file:      l.File, valPos: map[string]strictyaml.Pos{}, unset: map[string]string{},
	}
	for k, p := range l.ValPos {
		if rest, ok := strings.CutPrefix(k, "github."); ok {
			g.valPos[rest] = p
		}
	}
	// str expands the value of key, or reads the variable it defaults to
	// when the file does not write it; an unset variable leaves it empty
	// and is remembered for Require.
	str := func(key string, rawVal *string) (string, error) {
		full := "github." + key
		if rawVal == nil {
			name := gitHubEnvDefaults[key]
			if name == "" {
				return "", nil
			}
			v, ok := lookupEnv(name)
			if !ok || strings.TrimSpace(v) == "" {
				g.unset[key] = name
				return "", nil
			}
			return strings.TrimSpace(v), nil
		}
		out, err := Expand(*rawVal, lookupEnv)
		var ue *UnsetVariableError
		if errors.As(err, &ue) {
			g.unset[key] = ue.Name
			return "", nil
		}
		if err != nil {
			return "", l.ValueErr(full, err, "%s", full)
		}
		return strings.TrimSpace(out), nil
	}

	if raw.AppID != nil && raw.PrivateKeyFile == nil {
		return nil, l.KeyErr("github.app_id", nil, "github.app_id: an App needs its private_key_file too (or use token instead of app_id)")
	}
	if raw.PrivateKeyFile != nil && raw.AppID == nil {
		return nil, l.KeyErr("github.private_key_file", nil, "github.private_key_file: the key of which App? set app_id too")
	}

	s, err := str("app_id", raw.AppID)
	if err != nil {
		return nil, err
	}
	if s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			// The value is not quoted: a variable set to the wrong thing
			// might hold anything.
			return nil, l.ValueErr("github.app_id", nil, "github.app_id: want the App's id, a positive whole number (GitHub shows it on the App's settings page)")
		}
		g.AppID = id
	}
	if s, err = str("private_key_file", raw.PrivateKeyFile); err != nil {
		return nil, err
	}
	if s != "" {
		if !filepath.IsAbs(s) {
			s = filepath.Join(cfg.Dir, s)
		}
		g.PrivateKeyFile = filepath.Clean(s)
	}
	if s, err = str("token", raw.Token); err != nil {
		return nil, err
	}
	g.Token = Secret(s)
	if s, err = str("webhook_secret", raw.WebhookSecret); err != nil {
		return nil, err
	}
	g.WebhookSecret = Secret(s)

	first, err := l.repositories(g, raw.Repositories, lookupEnv)
	if err != nil {
		return nil, err
	}

	if s, err = str("api_url", raw.APIURL); err != nil {
		return nil, err
	}
	if raw.APIURL != nil {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			// Not quoted: a URL may carry credentials.
			return nil, l.ValueErr("github.api_url", nil, "github.api_url: want the REST API's root URL, such as %s or https://ghe.example.com/api/v3/", DefaultGitHubAPIURL)
		}
		if u.User != nil {
			return nil, l.ValueErr("github.api_url", nil, "github.api_url: must not carry credentials; use token or the App's key")
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		g.APIURL = u.String()
	}

	if s, err = str("project_dir", raw.ProjectDir); err != nil {
		return nil, err
	}
	if raw.ProjectDir != nil {
		dir := path.Clean(strings.ReplaceAll(s, `\`, "/"))
		if s == "" || path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
			return nil, l.ValueErr("github.project_dir", nil, "github.project_dir: want a folder inside the repository, relative to its root, such as . or analytics, got %q", *raw.ProjectDir)
		}
		g.ProjectDir = dir
	}

	if s, err = str("prod_branch", raw.ProdBranch); err != nil {
		return nil, err
	}
	if raw.ProdBranch != nil {
		if !branchRE.MatchString(s) {
			return nil, l.ValueErr("github.prod_branch", nil, "github.prod_branch: want a branch name such as main, got %q", *raw.ProdBranch)
		}
		g.ProdBranch = s
	}

	g.PREnvironmentName = DefaultPREnvironmentOf
	if first != "" {
		_, name, _ := strings.Cut(first, "/")
		g.PREnvironmentName = SanitizeEnvironmentPrefix(name)
	}
	if s, err = str("pr_environment_name", raw.PREnvironmentName); err != nil {
		return nil, err
	}
	if s != "" {
		g.PREnvironmentName = SanitizeEnvironmentPrefix(s)
	}

	if raw.PRStart != nil {
		const key = "github.pr_start"
		if node := l.ValNode[key]; node != nil && node.Type() != ast.StringType {
			e := l.ValueErr(key, nil, "%s: want a duration such as 12h, 1d or 2w, or a date such as 2024-01-01, got %s", key, node.String())
			e.Err = ErrBadPRStart
			return nil, e
		}
		if s, err = str("pr_start", raw.PRStart); err != nil {
			return nil, err
		}
		ps, err := ParsePRStart(s)
		if err != nil {
			return nil, l.ValueErr(key, err, "%s", key)
		}
		g.PRStart = ps
	}

	boolean := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	boolean(&g.EnableDeployCommand, raw.EnableDeployCommand)
	boolean(&g.DeployOnMerge, raw.DeployOnMerge)
	boolean(&g.CheckIfBlockedOnDeploy, raw.CheckIfBlockedOnDeploy)
	boolean(&g.InvalidatePREnvironmentAfterDeploy, raw.InvalidatePREnvironmentAfterDeploy)

	if s, err = str("command_namespace", raw.CommandNamespace); err != nil {
		return nil, err
	}
	if s != "" {
		const key = "github.command_namespace"
		if !g.EnableDeployCommand {
			return nil, l.KeyErr(key, nil, "%s: prefixes the /deploy command, which enable_deploy_command: false turns off; remove one of them", key)
		}
		if strings.ContainsAny(s, " \t\r\n/") {
			return nil, l.ValueErr(key, nil, "%s: want one word without spaces or '/', such as #gapless, got %q", key, *raw.CommandNamespace)
		}
		g.CommandNamespace = s
	}

	if s, err = str("merge_method", raw.MergeMethod); err != nil {
		return nil, err
	}
	if raw.MergeMethod != nil {
		m, err := ParseMergeMethod(s)
		if err != nil && strings.Contains(*raw.MergeMethod, "${") {
			// Say what was written, not what a variable holds.
			err = fmt.Errorf("%w: %s expands to none of merge, squash, rebase", ErrUnknownMergeMethod, *raw.MergeMethod)
		}
		if err != nil {
			return nil, l.ValueErr("github.merge_method", err, "github.merge_method")
		}
		g.MergeMethod = m
	}
	if err := l.mergeGate(g, raw.MergeGate); err != nil {
		return nil, err
	}
	return g, nil
}

// mergeGate reads github.merge_gate into g.
func (l *loader) mergeGate(g *GitHub, raw *fileMergeGate) error {
	if raw == nil {
		return nil
	}
	if raw.Environments != nil {
		envs := []string{}
		for i, e := range *raw.Environments {
			e = strings.TrimSpace(e)
			key := fmt.Sprintf("github.merge_gate.environments[%d]", i)
			if e == "" || strings.ContainsAny(e, " \t/") {
				return l.ValueErr("github.merge_gate.environments", nil, "%s: want an environment name such as prod, got %q", key, (*raw.Environments)[i])
			}
			if !slices.Contains(envs, e) {
				envs = append(envs, e)
			}
		}
		slices.Sort(envs)
		g.MergeGate.Environments = envs
	}
	if raw.WaitFor != nil {
		m, err := ParseWaitFor(*raw.WaitFor)
		if err != nil {
			return l.ValueErr("github.merge_gate.wait_for", err, "github.merge_gate.wait_for")
		}
		g.MergeGate.WaitFor = m
	}
	if raw.Wait != nil {
		d, err := time.ParseDuration(strings.TrimSpace(*raw.Wait))
		if err != nil || d <= 0 {
			return l.ValueErr("github.merge_gate.wait", nil, "github.merge_gate.wait: want a positive duration such as 2m or 90s, got %q", *raw.Wait)
		}
		g.MergeGate.Wait = d
	}
	return nil
}

// repositories reads github.repositories into g: each owner/name,
// lower-cased, refused with the position of the item when malformed or
// repeated. It returns the first repository as written ("" when none).
func (l *loader) repositories(g *GitHub, raw *[]string, lookupEnv func(string) (string, bool)) (string, error) {
	const key = "github.repositories"
	if raw == nil {
		return "", nil
	}
	var items []ast.Node
	if seq, ok := l.ValNode[key].(*ast.SequenceNode); ok {
		items = seq.Values
	}
	at := func(i int) strictyaml.Pos {
		if i < len(items) && items[i] != nil {
			if tk := items[i].GetToken(); tk != nil && tk.Position != nil {
				return strictyaml.Pos{Line: tk.Position.Line, Col: tk.Position.Column}
			}
		}
		return l.ValPos[key]
	}
	seen := map[string]int{}
	first := ""
	for i, r := range *raw {
		expanded, err := Expand(r, lookupEnv)
		var ue *UnsetVariableError
		if errors.As(err, &ue) {
			g.unset["repositories"] = ue.Name // Require says so when none is left
			continue
		}
		if err != nil {
			return "", l.ErrAt(key, at(i), err, "%s", key)
		}
		repo := strings.ToLower(strings.TrimSpace(expanded))
		_, name, _ := strings.Cut(repo, "/")
		if !repoRE.MatchString(repo) || name == "." || name == ".." {
			return "", l.ErrAt(key, at(i), nil, "%s: want owner/name, such as acme/analytics, got %q", key, r)
		}
		if j, dup := seen[repo]; dup {
			return "", l.ErrAt(key, at(i), nil, "%s: %s is listed twice (items %d and %d)", key, repo, j+1, i+1)
		}
		seen[repo] = i
		if first == "" {
			first = repo
		}
		g.Repositories = append(g.Repositories, repo)
	}
	slices.Sort(g.Repositories)
	return first, nil
}

// ErrUnknownMergeMethod is wrapped by ParseMergeMethod's error.
var ErrUnknownMergeMethod = errors.New("unknown merge method")

// MergeMethods lists the merge methods gapless.yaml accepts.
var MergeMethods = []codehost.MergeMethod{codehost.MergeMerge, codehost.MergeSquash, codehost.MergeRebase}

// ParseMergeMethod reads a merge method (case-insensitive): merge, squash
// or rebase.
func ParseMergeMethod(s string) (codehost.MergeMethod, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	names := make([]string, len(MergeMethods))
	for i, m := range MergeMethods {
		if t == string(m) {
			return m, nil
		}
		names[i] = string(m)
	}
	if c, ok := suggest.Closest(t, names); ok {
		return "", fmt.Errorf("%w %q: did you mean %s?", ErrUnknownMergeMethod, s, c)
	}
	return "", fmt.Errorf("%w %q (methods: %s)", ErrUnknownMergeMethod, s, strings.Join(names, ", "))
}
