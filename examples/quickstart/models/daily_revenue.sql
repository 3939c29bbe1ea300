MODEL (
  name demo.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily',
  grain (day, customer_id),
  description 'Revenue per customer per day, with its segment'
);

SELECT
  date_trunc('day', e.event_ts) AS day,
  e.customer_id,
  c.segment,
  count(*) AS events,
  sum(e.amount) AS revenue
FROM demo.events AS e
JOIN demo.customers AS c ON c.customer_id = e.customer_id
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL
