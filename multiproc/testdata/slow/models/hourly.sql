MODEL (
  name shop.hourly,
  kind INCREMENTAL_BY_TIME_RANGE (time_column hour),
  cron '@hourly'
);

SELECT date_trunc('hour', s.event_ts) AS hour, count(*) AS events, sum(s.amount) AS revenue
FROM shop.slow AS s
WHERE s.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY 1
