MODEL (
  name demo.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily',
  grain (day, customer_id),
  description 'Revenue per customer per day'
);

SELECT
  date_trunc('day', e.event_ts) AS day,
  e.customer_id,
  count(*) AS events,
  sum(e.amount) AS revenue
FROM demo.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL
