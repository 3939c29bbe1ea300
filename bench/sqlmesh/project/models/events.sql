-- Synthetic click events, one a minute, computed every five minutes since
-- early 2025: the shape SQLMesh users report slow plans on (a 5-minute cron
-- and an early start).
MODEL (
  name shop.events,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column event_ts
  ),
  cron '*/5 * * * *',
  start '2025-01-01',
  grain (event_id),
  description 'Synthetic events, one a minute'
);

SELECT
  (epoch(g.ts)::BIGINT / 60)::BIGINT AS event_id,
  g.ts AS event_ts,
  ((epoch(g.ts)::BIGINT / 60) % 7 + 1)::INTEGER AS customer_id,
  (((epoch(g.ts)::BIGINT / 60) % 11) * 2.5)::DOUBLE AS amount
FROM generate_series(@start_ts::TIMESTAMP, @end_ts::TIMESTAMP, INTERVAL 1 MINUTE) AS g(ts)
