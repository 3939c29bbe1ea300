MODEL (
  name demo.orders_hourly,
  kind INCREMENTAL_BY_TIME_RANGE (time_column hour),
  cron '@hourly',
  grain (hour),
  description 'Orders per hour, from the source raw.orders'
);

SELECT date_trunc('hour', order_ts) AS hour, count(*) AS orders, sum(amount) AS amount
FROM raw.orders
WHERE order_ts BETWEEN @start_ts AND @end_ts
GROUP BY 1
