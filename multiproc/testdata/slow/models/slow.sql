MODEL (
  name shop.slow,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 1),
  cron '@hourly'
);

-- Four rows an hour, each produced after a 0.5 s sleep (the subquery is
-- correlated, so it runs per row): an hourly batch takes about 2 s and
-- inserts its rows one by one inside its transaction.
SELECT g.ts AS event_ts, 1.5 AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL '15 minutes') AS g(ts)
WHERE (SELECT count(*) FROM pg_sleep(0.5 + 0 * extract(epoch FROM g.ts))) = 1
