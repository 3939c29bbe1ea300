-- Synthetic click events: one every five minutes, computed per hourly interval.
MODEL (
  name demo.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly',
  grain (event_id),
  description 'Synthetic events, twelve per hour'
);

SELECT
  epoch(g.ts)::BIGINT / 300 AS event_id,
  g.ts AS event_ts,
  (epoch(g.ts)::BIGINT / 300) % 5 + 1 AS customer_id,
  ((epoch(g.ts)::BIGINT / 300) % 7) * 1.5 AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL 5 MINUTE) AS g(ts)
