package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testNow is the clock run (cli_test.go) gives commands: the wall time
// their interval writes record, unlike --execution-time.
var testNow = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)

// Scenario: a status report with one model written (at 05:00, [04:00,
// 05:00)) and one never written. The --wide table has a LAST RUN column
// with the time and range, or "-"; the JSON has last_run_at and
// last_run_range for the first model only.
func TestStatusLastRunColumnAndFields(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 1, 2, 5, 0, 0, 0, time.UTC)
	rep := &statusReport{Environment: "prod", Generation: 1, PlanID: "p1", ExecutionTime: at, Models: []statusRow{
		{Name: "m.written", Version: "v1", Kind: "FULL", Cron: "@hourly", Covered: []string{}, Missing: []string{},
			OpenDebt: []openDebtRow{}, LastRunAt: at, LastRunRange: "[2024-01-02T04:00:00Z, 2024-01-02T05:00:00Z)"},
		{Name: "m.never", Version: "v1", Kind: "FULL", Cron: "@hourly", Covered: []string{}, Missing: []string{},
			OpenDebt: []openDebtRow{}},
	}}
	var out bytes.Buffer
	printStatusHeader(&out, rep)
	require.NoError(t, printStatusWide(&out, rep.Models))
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 5)
	require.Regexp(t, `DEBT\s+LAST RUN$`, string(lines[2]))
	require.Regexp(t, `^m\.written .* 2024-01-02T05:00:00Z \[2024-01-02T04:00:00Z, 2024-01-02T05:00:00Z\)$`, string(lines[3]))
	require.Regexp(t, `^m\.never .*-\s+-$`, string(lines[4]))

	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, rep))
	var decoded struct {
		Models []map[string]any `json:"models"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &decoded))
	require.Equal(t, "2024-01-02T05:00:00Z", decoded.Models[0]["last_run_at"])
	require.Equal(t, "[2024-01-02T04:00:00Z, 2024-01-02T05:00:00Z)", decoded.Models[0]["last_run_range"])
	require.NotContains(t, decoded.Models[1], "last_run_at")
	require.NotContains(t, decoded.Models[1], "last_run_range")
}
