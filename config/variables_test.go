package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/config"
)

func TestLoad_Variables(t *testing.T) {
	t.Parallel()
	// Scenario: SQLMesh's `variables:` block, read as the macros see it:
	// names in lower case, integers as int64, lists as []any.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(`variables:
  int_var: 1
  Neg_Var: -2
  float_var: 2.5
  bool_var: true
  str_var: "cat"
  list_var: [1, two, false]
`), 0o644))
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"int_var": int64(1), "neg_var": int64(-2), "float_var": 2.5, "bool_var": true, "str_var": "cat",
		"list_var": []any{int64(1), "two", false},
	}, cfg.Variables)

	cfg, err = config.LoadEnv(t.TempDir(), nil)
	require.NoError(t, err)
	require.Empty(t, cfg.Variables)
}

func TestLoad_VariablesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"a map", "variables:\n  ok: 1\n  dict_var:\n    key1: 1\n", "gapless.yaml:3:3: variables: dict_var: a map[string]interface {} is not supported (values are strings, numbers, booleans or lists of them)"},
		{"a null", "variables:\n  empty:\n", "gapless.yaml:2:3: variables: empty: a value is needed"},
		{"a nested list", "variables:\n  l: [[1]]\n", "gapless.yaml:2:3: variables: l: a list inside a list is not supported"},
		{"a bad name", "variables:\n  1abc: 1\n", "gapless.yaml:2:3: variables: \"1abc\" is not a macro variable name (letters, digits and underscores, not starting with a digit)"},
		{"names differing in case", "variables:\n  a: 1\n  A: 2\n", "variables: a is defined twice (names are case-insensitive)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(tt.yaml), 0o644))
			_, err := config.LoadEnv(dir, nil)
			var ce *config.Error
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
