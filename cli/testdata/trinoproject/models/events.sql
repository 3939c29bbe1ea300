MODEL (
  name shop.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly'
);

SELECT g.ts AS event_ts, CAST(to_unixtime(g.ts) AS bigint) / 900 % 2 + 1 AS customer_id, 1.5 AS amount
FROM UNNEST(sequence(@start_ts, @end_ts, INTERVAL '15' MINUTE)) AS g(ts)
