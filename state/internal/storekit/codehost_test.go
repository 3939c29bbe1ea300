package storekit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// Scenario: the stored form of a desired check run, which SetCheckDesired
// compares, omits empty fields (so a field added to state.CheckDesired
// later, empty in every stored row, changes no comparison and moves no
// revision), keeps field order fixed, and reads back as written.
func TestDesiredJSONIsStable(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"status":"queued"}`, DesiredJSON(state.CheckDesired{Status: "queued"}))
	full := state.CheckDesired{Status: "completed", Conclusion: "action_required", Title: "held", Summary: "s",
		Text: "t", DetailsURL: "https://example.test/x", ExternalID: "e"}
	require.Equal(t,
		`{"status":"completed","conclusion":"action_required","title":"held","summary":"s","text":"t","details_url":"https://example.test/x","external_id":"e"}`,
		DesiredJSON(full))
	back, err := ParseDesired(DesiredJSON(full))
	require.NoError(t, err)
	require.Equal(t, full, back)
	_, err = ParseDesired(`{"status":`)
	require.Error(t, err)
}
