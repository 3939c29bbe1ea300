package plan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
)

// IDSource gives a fresh plan id on every call.
type IDSource func() (string, error)

// RandomID returns a fresh random plan id (16 hex digits): the ids the
// command line gives its plans.
func RandomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a plan id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Numbered returns prefix+"1", prefix+"2", ... on successive calls: fixed
// ids for deterministic runs (tests, simulations). It is safe for
// concurrent use.
func Numbered(prefix string) IDSource {
	var n atomic.Int64
	return func() (string, error) { return prefix + strconv.FormatInt(n.Add(1), 10), nil }
}

// Fixed returns id on every call.
func Fixed(id string) IDSource {
	return func() (string, error) { return id, nil }
}

// AssembleParams are what Assemble builds a plan from.
type AssembleParams struct {
	// Store is read for the environment, the snapshots its base serves
	// and the intervals of every version the plan looks at (Against,
	// Build). Assemble writes nothing.
	Store       Source
	Environment string
	// Snapshots and Graph are the project's: its snapshots by model name
	// (fresh versions) and their DAG.
	Snapshots map[string]*snapshot.Snapshot
	Graph     *dag.Graph
	Additive  snapshot.Additive
	// IDs gives the plan its id; nil is RandomID.
	IDs           IDSource
	ExecutionTime time.Time
	Now           time.Time
	// Options are the operator's choices; Options.Select restricts the plan
	// (Select).
	Options Options
}

// Assemble builds a plan for p.Environment from the project's snapshots:
// it reads what the environment is built against (Against: a new
// development environment starts from prod), restricts the project to
// Options.Select (Select), takes an id from p.IDs, and builds the plan
// (Build). It is the one way a plan is made from a project, for the command
// line, the tests and the simulator alike.
//
// Errors of Build that name what is at fault (a *model.Error, whose
// message starts with the file, and a *snapshot.ChoiceError) are returned
// as they are; Build's other errors say which environment they are for.
func Assemble(ctx context.Context, p AssembleParams) (*Plan, error) {
	current, base, err := Against(ctx, p.Store, p.Environment)
	if err != nil {
		return nil, err
	}
	next, graph, err := Select(p.Snapshots, p.Graph, base, p.Options.Select)
	if err != nil {
		return nil, err
	}
	if next, graph, err = SelectBackfill(next, graph, base, p.Options.BackfillModels); err != nil {
		return nil, err
	}
	ids := p.IDs
	if ids == nil {
		ids = RandomID
	}
	id, err := ids()
	if err != nil {
		return nil, err
	}
	pl, err := Build(ctx, BuildParams{
		ID: id, Environment: p.Environment, Current: current, Base: base,
		Next: next, Graph: graph, Intervals: p.Store, Additive: p.Additive,
		ExecutionTime: p.ExecutionTime, Now: p.Now, Options: p.Options,
	})
	var ce *snapshot.ChoiceError
	var me *model.Error
	switch {
	case err == nil:
		return pl, nil
	case errors.As(err, &ce), errors.As(err, &me):
		return nil, err
	default:
		return nil, fmt.Errorf("building the plan for %s: %w", p.Environment, err)
	}
}

// ReplannerParams are what Replanner's replans are built with.
type ReplannerParams struct {
	// Store is read, at each replan, for the environment as it is then.
	Store Source
	// Additive returns the judge of additive changes for a replan's
	// context.
	Additive func(ctx context.Context) snapshot.Additive
	// IDs gives each replan its id; nil is RandomID.
	IDs IDSource
	// Clock is the wall clock a replan records as its creation time; nil
	// records the replan's execution time.
	Clock clockwork.Clock
}

// Replanner returns the function apply's replan policy calls
// (apply.Params.Replan) to build a fresh plan at a time at after prev was
// refused: Rebuild of prev, with an id from p.IDs. It is the one replanner
// of the command line, the tests and the simulator.
func Replanner(p ReplannerParams) func(ctx context.Context, prev *Plan, at time.Time) (*Plan, error) {
	ids := p.IDs
	if ids == nil {
		ids = RandomID
	}
	return func(ctx context.Context, prev *Plan, at time.Time) (*Plan, error) {
		id, err := ids()
		if err != nil {
			return nil, err
		}
		now := at
		if p.Clock != nil {
			now = p.Clock.Now().UTC()
		}
		var add snapshot.Additive
		if p.Additive != nil {
			add = p.Additive(ctx)
		}
		return Rebuild(ctx, RebuildParams{Prev: prev, ID: id, Store: p.Store, Additive: add, ExecutionTime: at, Now: now})
	}
}
