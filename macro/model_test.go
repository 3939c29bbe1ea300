package macro_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
)

func TestErrorsMapToTheModelFile(t *testing.T) {
	t.Parallel()
	// Scenario: a misspelt macro variable, and a SQL error found in the
	// placeholder form of the query, are both reported at the line and
	// column of the model file.
	src := "MODEL (\n  name s.t,\n  kind FULL\n);\n\nSELECT *\nFROM raw.e\nWHERE ds = @strat_ds\n"
	m, err := model.ParseFile("models/t.sql", []byte(src), model.Defaults{})
	require.NoError(t, err)

	_, err = macro.Render(m.Query, macro.Vars{}, string(m.Dialect))
	var me *macro.Error
	require.True(t, errors.As(err, &me))
	require.Equal(t, "models/t.sql:8:12", m.PosOf(me.Offset).String())

	fixed := strings.Replace(m.Query, "@strat_ds", "@start_ds GROUP", 1)
	m.Query = fixed
	out, mapper, err := macro.ForParse(m.Query)
	require.NoError(t, err)
	// Pretend the SQL parser stopped at the dangling GROUP.
	parseErrAt := strings.Index(out, "GROUP")
	require.Equal(t, "models/t.sql:8:22", m.PosOf(mapper.Original(parseErrAt)).String())
}
