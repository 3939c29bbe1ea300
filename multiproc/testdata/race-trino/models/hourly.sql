MODEL (
  name shop.hourly,
  kind INCREMENTAL_BY_TIME_RANGE (time_column hour),
  cron '@hourly'
);

SELECT date_trunc('hour', e.event_ts) AS hour, count(*) AS events, sum(e.amount) AS revenue
FROM shop.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY 1
