package apply

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
)

// registerComments keeps the comments SQLMesh users expect (a model's
// description and column descriptions) on what the environment serves,
// once its views are repointed:
//   - on the environment's view of every model whose view this apply
//     repointed (a replaced view loses its comments on some engines) or
//     whose snapshot the plan changes;
//   - on the physical table of a model whose change kept its version (a
//     metadata-only change, such as a new description, rebuilds nothing, so
//     the table's comments are renewed here; a new version's table got them
//     when it was created).
//
// Registering is idempotent; a failure fails the update-views stage, and
// applying the plan again registers them again.
func (a *applier) registerComments(ctx context.Context) error {
	changed := map[string]bool{}
	kept := map[string]bool{}
	for _, c := range a.Plan.Changes {
		if c.Category == snapshot.Unchanged || c.Category == snapshot.Removed {
			continue
		}
		changed[c.Name] = true
		if c.Version != "" && c.Version == c.PreviousVersion {
			kept[c.Name] = true
		}
	}
	for _, s := range a.Plan.Snapshots {
		if s.Model.Kind == model.KindExternal || !execute.LayoutOf(s.Model).HasComments() {
			continue
		}
		if kept[s.Name] {
			if err := a.x.RegisterComments(ctx, s); err != nil {
				return fmt.Errorf("registering the comments of %s on its table: %w", s.Name, err)
			}
		}
		if a.unchangedViews[s.Name] && !changed[s.Name] {
			continue
		}
		view := execute.ViewTable(s, a.Plan.Environment)
		if err := a.Engine.SetComments(ctx, execute.ViewComments(view, s.Model)); err != nil {
			return fmt.Errorf("registering the comments of %s on its view %s: %w", s.Name, view, err)
		}
	}
	return nil
}
