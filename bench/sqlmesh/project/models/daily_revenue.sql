MODEL (
  name shop.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column day
  ),
  cron '@daily',
  start '2025-01-01',
  grain (day, segment),
  description 'Revenue per day and segment'
);

SELECT
  h.hour::DATE AS day,
  h.segment,
  sum(h.events) AS events,
  sum(h.revenue) AS revenue
FROM shop.hourly_revenue AS h
WHERE h.hour::DATE BETWEEN @start_ds AND @end_ds
GROUP BY 1, 2
