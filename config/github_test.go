package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/snapshot"
)

// fullGitHub is the github: block with every key, secrets from variables.
const fullGitHub = `warehouse: duckdb://w.duckdb
github:
  app_id: ${GAPLESS_GITHUB_APP_ID}
  private_key_file: ${GAPLESS_GITHUB_KEY_FILE}
  token: ${GITHUB_TOKEN}
  webhook_secret: ${GAPLESS_WEBHOOK_SECRET}
  repositories: [Acme/Analytics, acme/infra]
  api_url: https://ghe.example.com/api/v3
  project_dir: ./analytics/
  prod_branch: release
  pr_environment_name: Data-Team
  pr_start: 2w
  enable_deploy_command: true
  command_namespace: "#gapless"
  deploy_on_merge: true
  merge_method: Rebase
  check_if_blocked_on_deploy: false
  invalidate_pr_environment_after_deploy: false
  merge_gate:
    environments: [staging, prod, prod]
    wait_for: Recorded
    wait: 90s
`

// Scenario: every key of the github: block is read, with ${VAR} expanded
// from the environment, relative paths resolved against the project, and
// names normalized.
func TestGitHub_EveryKey(t *testing.T) {
	t.Parallel()
	dir := project(t, ptr(fullGitHub))
	cfg, err := config.LoadEnv(dir, env(map[string]string{
		"GAPLESS_GITHUB_APP_ID": "123456", "GAPLESS_GITHUB_KEY_FILE": "keys/app.pem",
		"GITHUB_TOKEN": "ghp_token", "GAPLESS_WEBHOOK_SECRET": "whsec",
	}))
	require.NoError(t, err)
	g := cfg.GitHub
	require.NotNil(t, g)
	require.Equal(t, int64(123456), g.AppID)
	require.Equal(t, filepath.Join(dir, "keys", "app.pem"), g.PrivateKeyFile)
	require.Equal(t, "ghp_token", g.Token.Reveal())
	require.Equal(t, "whsec", g.WebhookSecret.Reveal())
	require.Equal(t, []string{"acme/analytics", "acme/infra"}, g.Repositories)
	require.Equal(t, "https://ghe.example.com/api/v3/", g.APIURL)
	require.Equal(t, "analytics", g.ProjectDir)
	require.Equal(t, "release", g.ProdBranch)
	require.Equal(t, "data_team", g.PREnvironmentName)
	require.Equal(t, config.PRStart{Ago: 14 * 24 * time.Hour}, g.PRStart)
	require.True(t, g.EnableDeployCommand)
	require.Equal(t, "#gapless", g.CommandNamespace)
	require.Equal(t, "#gapless/deploy", g.DeployCommand())
	require.True(t, g.DeployOnMerge)
	require.Equal(t, codehost.MergeRebase, g.MergeMethod)
	require.False(t, g.CheckIfBlockedOnDeploy)
	require.False(t, g.InvalidatePREnvironmentAfterDeploy)
	require.Equal(t, config.MergeGate{Environments: []string{"prod", "staging"}, WaitFor: config.WaitForRecorded, Wait: 90 * time.Second}, g.MergeGate)
	require.True(t, g.MergeGate.Gated("staging"))
	require.False(t, g.MergeGate.Gated("dev"))
	require.True(t, g.UsesApp())
	require.True(t, g.Allows("ACME/analytics"))
	require.False(t, g.Allows("acme/other"))
	require.NoError(t, g.Require("gapless serve", "webhook_secret", "repositories", "app_id", "private_key_file"))

	cfg, err = config.LoadEnv(project(t, ptr("github:\n  app_id: 99\n  private_key_file: /etc/gapless/app.pem\n")), nil)
	require.NoError(t, err)
	require.Equal(t, int64(99), cfg.GitHub.AppID, "a bare number")
	require.Equal(t, "/etc/gapless/app.pem", cfg.GitHub.PrivateKeyFile, "an absolute path stays")
}

// Scenario: a github: block that sets nothing gets the defaults; secrets
// it does not name come from their usual variables; a file without the
// block has no GitHub settings at all.
func TestGitHub_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadEnv(project(t, ptr("github:\n  repositories: [acme/Analytics.Core]\n")), nil)
	require.NoError(t, err)
	g := cfg.GitHub
	require.Equal(t, config.DefaultGitHubAPIURL, g.APIURL)
	require.Equal(t, ".", g.ProjectDir)
	require.Equal(t, "main", g.ProdBranch)
	require.Equal(t, "analytics_core", g.PREnvironmentName, "the first repository's name, sanitized")
	require.Equal(t, config.PRStart{Ago: 24 * time.Hour}, g.PRStart)
	require.True(t, g.EnableDeployCommand)
	require.Equal(t, "/deploy", g.DeployCommand())
	require.Empty(t, g.CommandNamespace)
	require.False(t, g.DeployOnMerge)
	require.Equal(t, codehost.MergeSquash, g.MergeMethod)
	require.True(t, g.CheckIfBlockedOnDeploy)
	require.True(t, g.InvalidatePREnvironmentAfterDeploy)
	require.Equal(t, config.MergeGate{Environments: []string{"prod"}, WaitFor: config.WaitForRendered, Wait: 2 * time.Minute}, g.MergeGate,
		"prod is gated by default, waiting for the holds to show on GitHub")
	require.Zero(t, g.AppID)
	require.Empty(t, g.PrivateKeyFile)
	require.True(t, g.Token.IsZero())
	require.True(t, g.WebhookSecret.IsZero())
	require.False(t, g.UsesApp())

	cfg, err = config.LoadEnv(project(t, ptr("github: {}\n")), env(map[string]string{
		"GITHUB_TOKEN": "ghp_from_env", "GAPLESS_WEBHOOK_SECRET": "s", "GAPLESS_GITHUB_APP_ID": "7", "GAPLESS_GITHUB_KEY_FILE": "/k.pem",
	}))
	require.NoError(t, err)
	g = cfg.GitHub
	require.Equal(t, "ghp_from_env", g.Token.Reveal())
	require.Equal(t, "s", g.WebhookSecret.Reveal())
	require.Equal(t, int64(7), g.AppID)
	require.Equal(t, "/k.pem", g.PrivateKeyFile)
	require.Equal(t, "pr", g.PREnvironmentName, "no repository: pr")
	require.Empty(t, g.Repositories)
	require.False(t, g.Allows("acme/analytics"), "an empty allowlist allows none")

	for _, content := range []string{"", "warehouse: duckdb://w.duckdb\n", "github:\n"} {
		cfg, err = config.LoadEnv(project(t, ptr(content)), env(map[string]string{"GITHUB_TOKEN": "x"}))
		require.NoError(t, err)
		require.Nil(t, cfg.GitHub, "%q", content)
	}
}

// Scenario: a variable that is not set does not stop the commands that
// never talk to GitHub; the key is empty, and Require names it, where it
// is written and the variable, for the command that needs it. ${VAR:-x}
// gives the default.
func TestGitHub_UnsetVariablesAreNamedByRequire(t *testing.T) {
	t.Parallel()
	dir := project(t, ptr("github:\n  repositories: [acme/a]\n  webhook_secret: ${GAPLESS_WEBHOOK_SECRET}\n  prod_branch: ${PROD_BRANCH:-master}\n  app_id: ${APP}\n  private_key_file: k.pem\n"))
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	g := cfg.GitHub
	require.True(t, g.WebhookSecret.IsZero())
	require.Equal(t, "master", g.ProdBranch)
	require.Zero(t, g.AppID)
	require.False(t, g.UsesApp(), "the key file alone is no App")

	err = g.Require("gapless serve", "repositories", "webhook_secret")
	file := filepath.Join(dir, config.FileName)
	require.EqualError(t, err, file+":3:19: github.webhook_secret: gapless serve requires it, and ${GAPLESS_WEBHOOK_SECRET} is not set")
	require.ErrorIs(t, err, config.ErrMissingGitHubSetting)
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "github.webhook_secret", ce.Key)

	require.EqualError(t, g.Require("gapless serve", "app_id"), file+":5:11: github.app_id: gapless serve requires it, and ${APP} is not set")
	require.EqualError(t, g.Require("gapless github run", "token"),
		file+": github.token: gapless github run requires it: set it in the github block, or set ${GITHUB_TOKEN}")
	require.EqualError(t, g.Require("x", "command_namespace"), file+": github.command_namespace: x requires it; set it in the github block")

	cfg, err = config.LoadEnv(project(t, ptr("github:\n  webhook_secret: ''\n")), nil)
	require.NoError(t, err)
	require.ErrorContains(t, cfg.GitHub.Require("gapless serve", "webhook_secret"), ":2:19: github.webhook_secret: gapless serve requires it, and it is empty")
	require.ErrorContains(t, cfg.GitHub.Require("gapless serve", "repositories"), "github.repositories: gapless serve requires it; set it")
}

func TestGitHub_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		env     map[string]string
		want    string // after "<dir>/gapless.yaml"
		key     string
		is      error
	}{
		{
			name:    "unknown key",
			content: "github:\n  repositories: [a/b]\n  merge_methd: squash\n",
			want:    ":3:3: unknown key merge_methd in github: did you mean merge_method?",
			key:     "github.merge_methd",
		},
		{
			name:    "unknown key, nothing close",
			content: "github:\n  zzz: 1\n",
			want: ":2:3: unknown key zzz in github (keys: app_id, private_key_file, token, webhook_secret, repositories, api_url, project_dir, " +
				"prod_branch, pr_environment_name, pr_start, enable_deploy_command, command_namespace, deploy_on_merge, merge_method, " +
				"check_if_blocked_on_deploy, invalidate_pr_environment_after_deploy, merge_gate)",
			key: "github.zzz",
		},
		{
			name:    "bad merge gate mode",
			content: "github:\n  merge_gate:\n    wait_for: rendred\n",
			want:    `:3:15: github.merge_gate.wait_for: unknown merge gate mode "rendred": want rendered or recorded`,
			key:     "github.merge_gate.wait_for",
		},
		{
			name:    "bad merge gate wait",
			content: "github:\n  merge_gate:\n    wait: soon\n",
			want:    `:3:11: github.merge_gate.wait: want a positive duration such as 2m or 90s, got "soon"`,
			key:     "github.merge_gate.wait",
		},
		{
			name:    "unknown merge gate key",
			content: "github:\n  merge_gate:\n    envs: [prod]\n",
			want:    ":3:5: unknown key envs in github.merge_gate (keys: environments, wait_for, wait)",
			key:     "github.merge_gate.envs",
		},
		{
			name:    "misspelt block",
			content: "gihub:\n  token: x\n",
			want:    ":1:1: unknown key gihub at the top level: did you mean github?",
			key:     "gihub",
		},
		{
			name:    "bad merge method",
			content: "github:\n  merge_method: sqash\n",
			want:    `:2:17: github.merge_method: unknown merge method "sqash": did you mean squash?`,
			key:     "github.merge_method",
			is:      config.ErrUnknownMergeMethod,
		},
		{
			name:    "merge method far off",
			content: "github:\n  merge_method: fast-forward\n",
			want:    `:2:17: github.merge_method: unknown merge method "fast-forward" (methods: merge, squash, rebase)`,
			key:     "github.merge_method",
			is:      config.ErrUnknownMergeMethod,
		},
		{
			name:    "merge method from a variable",
			content: "github:\n  merge_method: ${MM}\n",
			env:     map[string]string{"MM": "ff-only"},
			want:    `:2:17: github.merge_method: unknown merge method: ${MM} expands to none of merge, squash, rebase`,
			key:     "github.merge_method",
			is:      config.ErrUnknownMergeMethod,
		},
		{
			name:    "prod branch from a variable",
			content: "github:\n  prod_branch: ${B}\n",
			env:     map[string]string{"B": "a b"},
			want:    `:2:16: github.prod_branch: want a branch name such as main, got "${B}"`,
			key:     "github.prod_branch",
		},
		{
			name:    "repository without owner",
			content: "github:\n  repositories:\n    - acme/analytics\n    - analytics\n",
			want:    `:4:7: github.repositories: want owner/name, such as acme/analytics, got "analytics"`,
			key:     "github.repositories",
		},
		{
			name:    "repository with a path",
			content: "github:\n  repositories: [acme/a/b]\n",
			want:    `:2:18: github.repositories: want owner/name, such as acme/analytics, got "acme/a/b"`,
			key:     "github.repositories",
		},
		{
			name:    "repository twice",
			content: "github:\n  repositories: [acme/a, ACME/A]\n",
			want:    `:2:26: github.repositories: acme/a is listed twice (items 1 and 2)`,
			key:     "github.repositories",
		},
		{
			name:    "repository from a variable",
			content: "github:\n  repositories: [acme/a, '${REPO}']\n",
			env:     map[string]string{"REPO": "not a repo"},
			want:    `:2:26: github.repositories: want owner/name, such as acme/analytics, got "${REPO}"`,
			key:     "github.repositories",
		},
		{
			name:    "app id not a number",
			content: "github:\n  app_id: ${APP}\n  private_key_file: k.pem\n",
			env:     map[string]string{"APP": "abc"},
			want:    ":2:11: github.app_id: want the App's id, a positive whole number (GitHub shows it on the App's settings page)",
			key:     "github.app_id",
		},
		{
			name:    "app id without its key",
			content: "github:\n  app_id: 12\n",
			want:    ":2:3: github.app_id: an App needs its private_key_file too (or use token instead of app_id)",
			key:     "github.app_id",
		},
		{
			name:    "key without its app",
			content: "github:\n  private_key_file: k.pem\n",
			want:    ":2:3: github.private_key_file: the key of which App? set app_id too",
			key:     "github.private_key_file",
		},
		{
			name:    "api url without scheme",
			content: "github:\n  api_url: ghe.example.com/api/v3\n",
			want:    ":2:12: github.api_url: want the REST API's root URL, such as https://api.github.com/ or https://ghe.example.com/api/v3/",
			key:     "github.api_url",
		},
		{
			name:    "api url with credentials",
			content: "github:\n  api_url: https://bot:hunter2@ghe.example.com/api/v3/\n",
			want:    ":2:12: github.api_url: must not carry credentials; use token or the App's key",
			key:     "github.api_url",
		},
		{
			name:    "project dir outside the repository",
			content: "github:\n  project_dir: ../elsewhere\n",
			want:    `:2:16: github.project_dir: want a folder inside the repository, relative to its root, such as . or analytics, got "../elsewhere"`,
			key:     "github.project_dir",
		},
		{
			name:    "absolute project dir",
			content: "github:\n  project_dir: /srv/analytics\n",
			want:    `:2:16: github.project_dir: want a folder inside the repository, relative to its root, such as . or analytics, got "/srv/analytics"`,
			key:     "github.project_dir",
		},
		{
			name:    "prod branch with a space",
			content: "github:\n  prod_branch: 'my branch'\n",
			want:    `:2:16: github.prod_branch: want a branch name such as main, got "my branch"`,
			key:     "github.prod_branch",
		},
		{
			name:    "bad pr_start",
			content: "github:\n  pr_start: last week\n",
			want:    `:2:13: github.pr_start: bad pr_start "last week": want a duration back from now such as 12h, 1d or 2w, or a date such as 2024-01-01`,
			key:     "github.pr_start",
			is:      config.ErrBadPRStart,
		},
		{
			name:    "pr_start never",
			content: "github:\n  pr_start: never\n",
			want:    `:2:13: github.pr_start: bad pr_start "never": want a duration back from now such as 12h, 1d or 2w, or a date such as 2024-01-01`,
			key:     "github.pr_start",
			is:      config.ErrBadPRStart,
		},
		{
			name:    "pr_start without a unit",
			content: "github:\n  pr_start: 7\n",
			want:    `:2:13: github.pr_start: want a duration such as 12h, 1d or 2w, or a date such as 2024-01-01, got 7`,
			key:     "github.pr_start",
			is:      config.ErrBadPRStart,
		},
		{
			name:    "boolean as a string",
			content: "github:\n  deploy_on_merge: 'yes'\n",
			want:    `:2:20: github.deploy_on_merge: want a boolean, got a string`,
			key:     "github.deploy_on_merge",
		},
		{
			name:    "namespace without the command",
			content: "github:\n  enable_deploy_command: false\n  command_namespace: '#gapless'\n",
			want:    `:3:3: github.command_namespace: prefixes the /deploy command, which enable_deploy_command: false turns off; remove one of them`,
			key:     "github.command_namespace",
		},
		{
			name:    "namespace with a slash",
			content: "github:\n  command_namespace: '#a/b'\n",
			want:    `:2:22: github.command_namespace: want one word without spaces or '/', such as #gapless, got "#a/b"`,
			key:     "github.command_namespace",
		},
		{
			name:    "bad variable syntax",
			content: "github:\n  token: ${GITHUB_TOKEN\n",
			want:    `:2:10: github.token: unterminated ${ at byte 0: missing '}'`,
			key:     "github.token",
		},
		{
			name:    "block is a list",
			content: "github:\n  - token\n",
			want:    `:2:3: sequence was used where mapping is expected`,
			key:     "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, ptr(tt.content))
			_, err := config.LoadEnv(dir, env(tt.env))
			require.EqualError(t, err, filepath.Join(dir, config.FileName)+tt.want)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tt.key, ce.Key)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}

// Scenario: the token and the webhook secret, written in the file or read
// from a variable, never appear in an error about the file (the YAML
// parser's own error, which quotes the lines around the problem, is
// dropped), nor in the settings' String, %#v, slog or JSON forms.
func TestGitHub_SecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const token, secret = "ghp_SECRETTOKEN", "WHSECRET"
	for _, content := range []string{
		"github:\n  token: " + token + "\n  webhok_secret: x\n",
		"github:\n  token: \"" + token + "\n  webhook_secret: x\n",
		"github:\n  token: " + token + "\n   bad: indent\n",
		"github:\n  token: " + token + ": x\n",
		"github:\n  token: '" + token + "'x\n",
		"github:\n  webhook_secret: " + secret + "\n  webhook_secret: again\n",
		"github:\n  token: " + token + "\n  - item\n",
		"github:\n  webhook_secret: [" + secret + "]\n",
		"github:\n  token: {a: " + token + "}\n",
		"github:\n  webhook_secret: " + secret + "\n  merge_method: nope\n",
		"github:\n\ttoken: " + token + "\n",
	} {
		_, err := config.LoadEnv(project(t, ptr(content)), nil)
		require.Error(t, err, content)
		for e := error(err); e != nil; e = errors.Unwrap(e) {
			require.NotContains(t, e.Error(), token, content)
			require.NotContains(t, e.Error(), secret, content)
			require.NotContains(t, fmt.Sprintf("%+v %#v", e, e), token, content)
		}
		var ce *config.Error
		require.ErrorAs(t, err, &ce, content)
		require.Positive(t, ce.Line, "%q: %v", content, err)
	}

	cfg, err := config.LoadEnv(project(t, ptr("github:\n  token: ${T}\n  webhook_secret: "+secret+"\n  repositories: [acme/a]\n")),
		env(map[string]string{"T": token}))
	require.NoError(t, err)
	g := cfg.GitHub
	require.Equal(t, token, g.Token.Reveal())
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	log.Info("config", "github", g, "ptr", cfg.GitHub, "token", g.Token)
	text := slog.New(slog.NewTextHandler(&logged, nil))
	text.Info("config", "github", *g, "cfg", cfg)
	js, err := json.Marshal(g)
	require.NoError(t, err)
	for _, out := range []string{
		g.String(), fmt.Sprint(g), fmt.Sprintf("%v %+v %#v %s", *g, *g, *g, g), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
		logged.String(), string(js), g.Token.GoString(),
	} {
		require.NotContains(t, out, token)
		require.NotContains(t, out, secret)
	}
	require.Contains(t, g.String(), "xxxxx")
	require.Contains(t, logged.String(), `"token":"xxxxx"`)
	require.Contains(t, logged.String(), `webhook_secret: \"xxxxx\"`)
	require.Empty(t, config.Secret("").String(), "an empty secret says it is empty")
}

// Scenario: PrivateKey reads the App's key; a missing file or one that is
// not a PEM private key is an error naming the file, never its content.
func TestGitHub_PrivateKey(t *testing.T) {
	t.Parallel()
	dir := project(t, ptr("github:\n  app_id: 1\n  private_key_file: keys/app.pem\n"))
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	g := cfg.GitHub
	file := filepath.Join(dir, "keys", "app.pem")

	_, err = g.PrivateKey()
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "github.private_key_file "+file+": cannot read")

	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o700))
	require.NoError(t, os.WriteFile(file, []byte("not-a-key-SECRETCONTENT"), 0o600))
	_, err = g.PrivateKey()
	require.ErrorIs(t, err, config.ErrBadPrivateKey)
	require.ErrorContains(t, err, file)
	require.NotContains(t, err.Error(), "SECRETCONTENT")

	pemKey := "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n"
	require.NoError(t, os.WriteFile(file, []byte(pemKey), 0o600))
	got, err := g.PrivateKey()
	require.NoError(t, err)
	require.Equal(t, pemKey, string(got))

	_, err = (&config.GitHub{}).PrivateKey()
	require.ErrorIs(t, err, config.ErrMissingGitHubSetting)
}

func TestParsePRStart(t *testing.T) {
	t.Parallel()
	exec := time.Date(2024, 3, 10, 6, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"1d":                   time.Date(2024, 3, 9, 6, 0, 0, 0, time.UTC),
		"12h":                  time.Date(2024, 3, 9, 18, 0, 0, 0, time.UTC),
		"1h30m":                time.Date(2024, 3, 10, 4, 30, 0, 0, time.UTC),
		"2w":                   time.Date(2024, 2, 25, 6, 0, 0, 0, time.UTC),
		"2024-03-01":           time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC),
		"2024-03-01T12:00:00Z": time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC),
	} {
		s, err := config.ParsePRStart(in)
		require.NoError(t, err, in)
		require.Equal(t, want, s.From(exec), in)
		require.Equal(t, in, s.String(), "String writes it as the file does")
	}
	for _, bad := range []string{"", "0", "0d", "-1d", "never", "yesterday", "2024-02-30"} {
		_, err := config.ParsePRStart(bad)
		require.ErrorIs(t, err, config.ErrBadPRStart, bad)
	}
}

// Scenario: the PR environment prefix is made a name that, followed by
// _<number>, snapshot.CheckEnvironmentName accepts, whatever was written.
func TestSanitizeEnvironmentPrefix(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"analytics":      "analytics",
		"Analytics":      "analytics",
		"data-team.core": "data_team_core",
		"a__b---c":       "a_b_c",
		"__x__":          "x",
		"":               "pr",
		"---":            "pr",
		"9lives":         "pr_9lives",
		"_9":             "pr_9",
		"données":        "donn_es",
		"日本":             "pr",
		"abcdefghijklmnopqrstuvwxyz_abcdefghijklmnopqrstuvwxyz": "abcdefghijklmnopqrstuvwxyz_abcdefghijklm",
		"abcdefghijklmnopqrstuvwxyz_abcdefghijkl_mnop":          "abcdefghijklmnopqrstuvwxyz_abcdefghijkl",
	} {
		got := config.SanitizeEnvironmentPrefix(in)
		require.Equal(t, want, got, in)
		require.NoError(t, snapshot.CheckEnvironmentName(got+"_42"), in)
	}
}

func TestParseMergeMethod(t *testing.T) {
	t.Parallel()
	for _, m := range config.MergeMethods {
		got, err := config.ParseMergeMethod(" " + string(m) + " ")
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := config.ParseMergeMethod("")
	require.ErrorIs(t, err, config.ErrUnknownMergeMethod)
}
