MODEL (
  name shop.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily'
);

SELECT date_trunc('day', e.event_ts) AS day, e.customer_id, count(*) AS events, sum(e.amount) AS revenue
FROM shop.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY 1, 2
