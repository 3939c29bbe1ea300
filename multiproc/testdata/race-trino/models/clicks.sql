MODEL (
  name shop.clicks,
  kind INCREMENTAL_BY_TIME_RANGE (time_column click_ts, batch_size 1),
  cron '@hourly'
);

-- A model the deploy does not change: both daemons compete for it.
SELECT g.ts AS click_ts, 7 AS page
FROM UNNEST(sequence(@start_ts, @end_ts, INTERVAL '15' MINUTE)) AS g(ts)
