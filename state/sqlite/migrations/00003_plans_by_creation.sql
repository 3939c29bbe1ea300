-- ListPlans lists saved plans newest first (created_at_us descending, then
-- id), optionally of one environment and created after an instant. Each
-- index matches one shape of its query, in its order, so the listing is a
-- range of an index however many plans were ever saved.

-- +goose Up
CREATE INDEX plans_by_creation ON plans (created_at_us DESC, id);
CREATE INDEX plans_by_environment_creation ON plans (environment, created_at_us DESC, id);

-- +goose Down
DROP INDEX plans_by_environment_creation;
DROP INDEX plans_by_creation;
