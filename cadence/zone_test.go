package cadence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
)

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

// Scenario: a daily model whose cron '0 2 * * *' is read in Los Angeles
// (cron_tz) becomes due at 02:00 there (10:00 UTC in winter, 09:00 UTC in
// summer), not at 02:00 UTC; its intervals stay UTC days.
func TestCronTZ_FiresInZoneIntervalsStayUTC(t *testing.T) {
	t.Parallel()
	m, err := model.ParseFile("models/m.sql", []byte(`MODEL (name s.t, kind FULL, cron '0 2 * * *', cron_tz 'America/Los_Angeles', start '2024-01-01'); SELECT 1`), model.Defaults{})
	require.NoError(t, err)
	spec, err := cadence.ForModel(m)
	require.NoError(t, err)
	require.Equal(t, interval.Day, spec.Unit)

	// 09:59 UTC on Jan 5 is 01:59 in LA: the 5th's firing has not come,
	// so the newest due day is the 3rd (the 4th 02:00 LA fired).
	r, ok := spec.DueAt(utc(2024, 1, 5, 9, 59))
	require.True(t, ok)
	require.Equal(t, interval.NewRange(utc(2024, 1, 3, 0, 0), utc(2024, 1, 4, 0, 0)), r)
	next, ok := spec.NextDue(utc(2024, 1, 5, 9, 59))
	require.True(t, ok)
	require.Equal(t, utc(2024, 1, 5, 10, 0), next)
	r, _ = spec.DueAt(utc(2024, 1, 5, 10, 0))
	require.Equal(t, interval.NewRange(utc(2024, 1, 4, 0, 0), utc(2024, 1, 5, 0, 0)), r, "due at 02:00 LA, a UTC day")

	// Summer time: 02:00 PDT is 09:00 UTC.
	next, ok = spec.NextDue(utc(2024, 7, 5, 8, 0))
	require.True(t, ok)
	require.Equal(t, utc(2024, 7, 5, 9, 0), next)

	// The same model without cron_tz fires at 02:00 UTC.
	m.CronTZ = ""
	plain, err := cadence.ForModel(m)
	require.NoError(t, err)
	next, _ = plain.NextDue(utc(2024, 1, 5, 1, 0))
	require.Equal(t, utc(2024, 1, 5, 2, 0), next)
}

// Scenario: across the spring-forward and fall-back changes an hourly cron
// read in a zone keeps firing strictly later each time, never twice at one
// instant, and Advances counts what NextDue walks.
func TestCronTZ_DaylightSavingChanges(t *testing.T) {
	t.Parallel()
	m, err := model.ParseFile("models/m.sql", []byte(`MODEL (name s.t, kind FULL, cron '30 * * * *', cron_tz 'Europe/Berlin', start '2024-01-01', allow_partials true); SELECT 1`), model.Defaults{})
	require.NoError(t, err)
	spec, err := cadence.ForModel(m)
	require.NoError(t, err)
	for _, from := range []time.Time{utc(2024, 3, 30, 22, 0), utc(2024, 10, 26, 22, 0)} {
		at := from
		for range 8 {
			n, ok := spec.NextDue(at)
			require.True(t, ok)
			require.True(t, n.After(at), "%s after %s", n, at)
			require.LessOrEqual(t, n.Sub(at), 2*time.Hour)
			at = n
		}
	}
}

// Scenario: a model whose stored cron_tz no longer names a zone is a named
// error at its header, never a panic.
func TestCronTZ_BadStoredZone(t *testing.T) {
	t.Parallel()
	m, err := model.ParseFile("models/m.sql", []byte(`MODEL (name s.t, kind FULL, start '2024-01-01'); SELECT 1`), model.Defaults{})
	require.NoError(t, err)
	m.CronTZ = "Mars/Olympus"
	_, err = cadence.ForModel(m)
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.Contains(t, me.Error(), `models/m.sql:1:1: model s.t: bad cron_tz "Mars/Olympus"`)
}
