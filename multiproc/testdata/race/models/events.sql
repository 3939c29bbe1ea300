MODEL (
  name shop.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 1),
  cron '@hourly'
);

-- Four rows an hour; every batch takes at least 0.4 s (an InitPlan that
-- sleeps once), so that the daemons and the deploy overlap in time.
SELECT g.ts AS event_ts, 1 AS customer_id, 1.5 AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL '15 minutes') AS g(ts)
WHERE (SELECT count(*) FROM pg_sleep(0.4)) = 1
