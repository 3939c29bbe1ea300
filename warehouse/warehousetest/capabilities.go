package warehousetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// capabilityScenarios check an engine's declaration itself
// (Engine.Capabilities): it never changes, its promotion text says what
// it declares, and it claims ingestion exactly when the engine can ingest.
// The other groups then assert what is declared.
var capabilityScenarios = []scenario{
	{"DeclarationIsStable", testCapabilitiesStable},
	{"PromotionTextMatchesAtomicViews", testCapabilitiesPromotion},
	{"IngestIffIngester", testCapabilitiesIngest},
}

// notIngestingScenarios are the group Ingest, in place of the ingestion
// groups (Ingest, IngestSkip, DropGeneration), on an engine that does not
// declare Capabilities.Ingest:
// the declaration must be honest, since gapless refuses to ingest into
// such a warehouse instead of calling methods it lacks.
var notIngestingScenarios = []scenario{
	{"NotDeclaredNotImplemented", testIngestNotDeclared},
}

// Scenario: plan output, promotion and ingestion each ask the engine what
// it guarantees, at different times and on different engines opened from
// one warehouse URL; every answer must be the same: two calls on one
// engine agree, and agree with another engine of the same factory (the
// one Run opened first).
func testCapabilitiesStable(t *testing.T, f *fixture) {
	first, second := f.e.Capabilities(), f.e.Capabilities()
	require.Equal(t, first, second, "two calls of Capabilities disagree")
	require.Equal(t, f.declared, first, "two engines of one factory declare different capabilities")
}

// Scenario: `gapless plan` prints how the environment's views will change
// (Capabilities.Promotion); the text promises one transaction exactly
// where the engine declares AtomicViews, and one view at a time elsewhere.
func testCapabilitiesPromotion(t *testing.T, f *fixture) {
	text := f.caps.Promotion()
	require.NotEmpty(t, text)
	atomic := strings.Contains(text, "one transaction")
	oneByOne := strings.Contains(text, "one view at a time")
	require.Equal(t, f.caps.AtomicViews, atomic, "AtomicViews is %v but the promotion text is %q", f.caps.AtomicViews, text)
	require.NotEqual(t, atomic, oneByOne, "the promotion text %q promises both or neither", text)
}

// Scenario: gapless decides from Capabilities.Ingest whether a source can
// land in the warehouse, and the ingest worker then type-asserts
// warehouse.Ingester: the declaration says Ingest exactly when the engine
// implements Ingester, and an engine that does not ingest has no
// GenerationDropper either (the janitor would drop generations nothing
// made).
func testCapabilitiesIngest(t *testing.T, f *fixture) {
	_, ingester := f.e.(warehouse.Ingester)
	require.Equal(t, f.caps.Ingest, ingester, "Capabilities().Ingest is %v, but %T implementing warehouse.Ingester is %v", f.caps.Ingest, f.e, ingester)
	if !f.caps.Ingest {
		_, dropper := f.e.(warehouse.GenerationDropper)
		require.False(t, dropper, "%T declares no Ingest but implements warehouse.GenerationDropper", f.e)
	}
}

// Scenario: an engine without Capabilities.Ingest (Trino) runs none of
// the ingestion scenarios; in their stead it shows the declaration is
// honest: it declares no Ingest, and implements neither warehouse.Ingester
// nor warehouse.GenerationDropper, so nothing can call ingestion on it.
func testIngestNotDeclared(t *testing.T, f *fixture) {
	require.False(t, f.caps.Ingest, "the engine declares Ingest, so the ingestion scenarios must run")
	_, ingester := f.e.(warehouse.Ingester)
	require.False(t, ingester, "%T implements warehouse.Ingester but does not declare Ingest", f.e)
	_, dropper := f.e.(warehouse.GenerationDropper)
	require.False(t, dropper, "%T implements warehouse.GenerationDropper but does not declare Ingest", f.e)
}
