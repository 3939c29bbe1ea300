package cli

import (
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/execute"
)

// environmentStatements are cfg's before_all and after_all statements for
// an apply or a run (apply.Params.Statements, run.Params.Statements); nil
// when there is no configuration or it has none.
func environmentStatements(cfg *config.Config) *execute.EnvironmentStatements {
	if cfg == nil {
		return nil
	}
	return execute.NewEnvironmentStatements(cfg.BeforeAll, cfg.AfterAll, cfg.Variables)
}
