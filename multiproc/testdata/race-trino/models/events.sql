MODEL (
  name shop.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 1),
  cron '@hourly'
);

-- The race fixture in Trino's dialect: four rows an hour. No sleep is
-- needed for the daemons and the deploy to overlap in time: each batch is
-- a MERGE that Trino plans, runs on the worker and commits to Iceberg in
-- a few hundred milliseconds at least.
SELECT g.ts AS event_ts, 1 AS customer_id, 1.5 AS amount
FROM UNNEST(sequence(@start_ts, @end_ts, INTERVAL '15' MINUTE)) AS g(ts)
