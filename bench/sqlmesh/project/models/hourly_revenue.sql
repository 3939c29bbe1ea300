MODEL (
  name shop.hourly_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column hour
  ),
  cron '@hourly',
  start '2025-01-01',
  grain (hour, segment),
  description 'Events and revenue per hour and customer segment'
);

SELECT
  date_trunc('hour', e.event_ts) AS hour,
  c.segment,
  count(*) AS events,
  sum(e.amount) AS revenue
FROM shop.events AS e
JOIN shop.customers AS c
  ON c.customer_id = e.customer_id
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY 1, 2
