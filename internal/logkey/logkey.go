// Package logkey is gapless's one vocabulary of log attribute keys: every
// slog attribute gapless writes uses one of these constants, so that one
// concept has one spelling across packages (an environment is always
// "environment", a plan id always "plan") and a dashboard or a grep written
// against one command works against every other.
//
// Rules the constants keep:
//   - lower snake case;
//   - an identifier is named after what it identifies ("plan", not
//     "plan_id"), a count after what it counts ("models" is a number of
//     models, "due_models" too);
//   - a duration carries its unit in its key and is logged as a number in
//     that unit ("duration_ms", "lag_seconds"), never as slog.Duration,
//     which JSON renders in nanoseconds;
//   - a record carries each key once: a logger that already has a key
//     (apply's and run's loggers carry environment and plan) is not given
//     it again.
//
// DEVELOPERS.md lists the keys. CheckRecord is the check: TestLogKeys in
// packages cli and scheduler decode the JSON records of real commands and
// of the daemon with it, and this package's test fails on a literal key in
// a log call anywhere in the module.
package logkey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
)

// The keys. Keep All and DEVELOPERS.md in step with them.
const (
	Accepted           = "accepted"            // a promotion verdict accepted the candidate
	Action             = "action"              // a webhook delivery's action (opened, synchronize, created, ...)
	Addr               = "addr"                // the scheduler's HTTP listen address
	Advances           = "advances"            // how often the incumbent advanced after the plan
	Attempt            = "attempt"             // the replan policy's attempt number
	Audit              = "audit"               // an audit's name
	Backfills          = "backfills"           // a plan's number of backfills
	Batches            = "batches"             // a number of batches
	Bound              = "bound"               // a policy's bound
	By                 = "by"                  // what still uses a physical schema
	CachedQueries      = "cached_queries"      // model queries the parse cache answered
	Changes            = "changes"             // a plan's number of changes
	Check              = "check"               // a check run's name
	Child              = "child"               // the child a verdict is about
	Comment            = "comment"             // a code-host comment's id
	CurrentGeneration  = "current_generation"  // the environment's generation when a run stopped
	CurrentPlan        = "current_plan"        // the plan an environment serves now
	Debts              = "debts"               // a number of freshness debts
	Deferred           = "deferred"            // deferred intervals, or a number of deferred models
	DeferredModels     = "deferred_models"     // the models a scheduler tick deferred
	Delivery           = "delivery"            // a webhook delivery's id (X-GitHub-Delivery)
	Deploy             = "deploy"              // a deploy attempt's id
	Deploys            = "deploys"             // simulate: the number of deploys
	DryRun             = "dry_run"             // janitor --dry-run
	DueModels          = "due_models"          // a number of models with due work
	DurationMS         = "duration_ms"         // how long something took, in milliseconds
	Environment        = "environment"         // an environment's name
	Environments       = "environments"        // environment names, or a number of environments
	Error              = "error"               // the error
	Event              = "event"               // a webhook delivery's event (X-GitHub-Event)
	ExpiresAt          = "expires_at"          // when an environment expires
	Failed             = "failed"              // the failed model that blocks this one
	Files              = "files"               // a number of files written
	FollowedPromotions = "followed_promotions" // promotions a scheduler tick followed
	FromGeneration     = "from_generation"     // the generation a run started on
	FrontierAtPlan     = "frontier_at_plan"    // the incumbent's frontier when the plan was built
	FrontierNow        = "frontier_now"        // the incumbent's frontier at promotion
	GateMode           = "gate_mode"           // a merge gate's mode (rendered or recorded)
	Generation         = "generation"          // an environment's generation
	GraceMS            = "grace_ms"            // the scheduler's stop grace, in milliseconds
	Head               = "head"                // a pull request's head commit
	Holder             = "holder"              // a lease's holder (lease.Describe)
	Holds              = "holds"               // a number of merge-gate holds
	HolderExpiresAt    = "holder_expires_at"   // when the holder's lease expires
	HolderHost         = "holder_host"         // the holder's host
	HolderPID          = "holder_pid"          // the holder's process id
	Host               = "host"                // this process's host
	Interval           = "interval"            // an interval or a set of them
	Intervals          = "intervals"           // a number of intervals
	Invalidated        = "invalidated"         // the environment was invalidated
	JitterMS           = "jitter_ms"           // the scheduler's tick jitter, in milliseconds
	Job                = "job"                 // a queued job's id
	Kind               = "kind"                // a queued job's kind
	LagSeconds         = "lag_seconds"         // an environment's lag, in seconds (as the metric)
	Lease              = "lease"               // a lease's key
	Leases             = "leases"              // a number of leases
	LockWaitMS         = "lock_wait_ms"        // --lock-wait, in milliseconds
	MaxAttempts        = "max_attempts"        // a queued job's attempt cap
	Model              = "model"               // a model's name
	Models             = "models"              // a number of models
	NextPlan           = "next_plan"           // the plan a replan applies next
	Outcome            = "outcome"             // how a webhook delivery or a job ended (a closed set per use)
	Owner              = "owner"               // a lease's owner
	PID                = "pid"                 // this process's id
	PR                 = "pr"                  // a pull request's number
	Panic              = "panic"               // what a recovered panic held
	ParsedQueries      = "parsed_queries"      // model queries parsed (not in the parse cache)
	Path               = "path"                // a file's path
	Plan               = "plan"                // a plan's id
	Policy             = "policy"              // a promotion policy
	Project            = "project"             // the project folder
	Promoted           = "promoted"            // simulate: the number of promotions
	RanModels          = "ran_models"          // a number of models that ran
	Reason             = "reason"              // why (a verdict's reason code, a kept schema's reason)
	Repo               = "repo"                // a code-host repository, owner/name
	Revision           = "revision"            // a stored verdict's or check render's revision
	Round              = "round"               // a catch-up round
	Route              = "route"               // a code-host API route template
	Rows               = "rows"                // a number of rows
	Schema             = "schema"              // a warehouse schema
	SchemaVersion      = "schema_version"      // the state store's schema version
	Schemas            = "schemas"             // a number of schemas
	Sender             = "sender"              // the code-host user who caused an event
	Skipped            = "skipped"             // intervals found already covered
	Snapshots          = "snapshots"           // a number of snapshots
	Stage              = "stage"               // an apply stage
	Staged             = "staged"              // a number of source batches staged
	State              = "state"               // the state store's location
	Status             = "status"              // an HTTP status code
	Suffix             = "suffix"              // the trailing range a verdict judged
	Table              = "table"               // a warehouse table
	Tables             = "tables"              // a number of tables
	TickMS             = "tick_ms"             // the scheduler's tick, in milliseconds
	Trace              = "trace"               // a recovered panic's stack
	Until              = "until"               // when a deferral's lease expires
	Version            = "version"             // a model version
	Views              = "views"               // a number of views
	Warehouse          = "warehouse"           // the warehouse's location
	Watermark          = "watermark"           // a source's published watermark (complete through)
	Whole              = "whole"               // a kind built whole
)

// All is every key gapless writes, besides slog's own time, level and msg.
var All = []string{
	Accepted, Action, Addr, Advances, Attempt, Audit, Backfills, Batches, Bound, By, CachedQueries, Changes,
	Check, Child, Comment, CurrentGeneration, CurrentPlan, Debts, Deferred, DeferredModels, Delivery,
	Deploy, Deploys, DryRun, DueModels, DurationMS, Environment, Environments, Error, Event,
	ExpiresAt, Failed, Files, FollowedPromotions, FromGeneration, FrontierAtPlan, FrontierNow,
	GateMode, Generation, GraceMS, Head, Holder, Holds, HolderExpiresAt, HolderHost, HolderPID, Host, Interval,
	Intervals, Invalidated, JitterMS, Job, Kind, LagSeconds, Lease, Leases, LockWaitMS, MaxAttempts,
	Model, Models, NextPlan, Outcome, Owner, PID, PR, Panic, ParsedQueries, Path, Plan, Policy,
	Project, Promoted, RanModels, Reason, Repo, Revision, Round, Route, Rows, Schema, SchemaVersion,
	Schemas, Sender, Skipped, Snapshots, Stage, Staged, State, Status, Suffix, Table, Tables, TickMS,
	Trace, Until, Version, Views, Warehouse, Watermark, Whole,
}

// CheckRecord decodes one JSON log record (a line of slog's JSON handler)
// and reports a key outside slog's own (time, level, msg) and All, or a key
// that appears twice in the record: the check behind the log-key tests.
func CheckRecord(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not a JSON log record: %s", line)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not a JSON log record: %w: %s", err, line)
		}
		k, _ := tok.(string)
		switch {
		case seen[k]:
			return fmt.Errorf("key %q twice in one record: %s", k, line)
		case !known[k]:
			return fmt.Errorf("key %q is not in logkey.All (nor slog's time, level, msg): %s", k, line)
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("not a JSON log record: %w: %s", err, line)
		}
	}
	return nil
}

var known = func() map[string]bool {
	m := map[string]bool{slog.TimeKey: true, slog.LevelKey: true, slog.MessageKey: true}
	for _, k := range All {
		m[k] = true
	}
	return m
}()
