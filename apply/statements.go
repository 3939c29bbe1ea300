package apply

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
)

// afterAll runs the after_all statements (Params.Statements) once the
// apply ended with err nil, and returns err otherwise: SQLMesh runs them
// after a plan's last stage, not after a failure.
func (a *applier) afterAll(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	if err := a.Statements.RunAfter(ctx, a.Engine, a.Plan.Environment, a.Plan.ExecutionTime); err != nil {
		return fmt.Errorf("apply %s: %w", a.Plan.ID, err)
	}
	return nil
}

// onVirtualUpdate runs, once the environment's views are repointed, the
// on-virtual-update statements (ON_VIRTUAL_UPDATE_BEGIN; ...
// ON_VIRTUAL_UPDATE_END;) of every model whose view this apply repointed
// or whose snapshot the plan changes (a change to the statements alone is
// metadata and keeps the view as it was), with @this_model the view.
// SQLMesh runs them when it promotes a snapshot into an environment. A
// failure fails the update-views stage, naming the model and the
// statement's file:line; the views stay repointed, and applying the plan
// again runs the statements again.
func (a *applier) onVirtualUpdate(ctx context.Context) error {
	changed := map[string]bool{}
	for _, c := range a.Plan.Changes {
		if c.Category != snapshot.Unchanged && c.Category != snapshot.Removed {
			changed[c.Name] = true
		}
	}
	for _, s := range a.Plan.Snapshots {
		if len(s.Model.OnVirtualUpdate) == 0 || s.Model.Kind == model.KindExternal || (a.unchangedViews[s.Name] && !changed[s.Name]) {
			continue
		}
		if err := execute.RunOnVirtualUpdate(ctx, a.Engine, s, execute.ViewTable(s, a.Plan.Environment), a.Plan.ExecutionTime); err != nil {
			return fmt.Errorf("after repointing the views of environment %s: %w", a.Plan.Environment, err)
		}
	}
	return nil
}
