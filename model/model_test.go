package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// The two INCREMENTAL kinds are computed per interval; every other kind is
// built whole.
func TestKindIsIncremental(t *testing.T) {
	t.Parallel()
	for k, want := range map[model.Kind]bool{
		model.KindIncrementalByTimeRange: true, model.KindIncrementalByUniqueKey: true,
		model.KindFull: false, model.KindView: false, model.KindSeed: false, model.KindExternal: false,
	} {
		require.Equal(t, want, k.IsIncremental(), "%s", k)
	}
}
