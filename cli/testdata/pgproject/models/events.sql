MODEL (
  name shop.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly'
);

SELECT g.ts AS event_ts, (extract(epoch FROM g.ts)::bigint / 900) % 2 + 1 AS customer_id, 1.5 AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL '15 minutes') AS g(ts)
