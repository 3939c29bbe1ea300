MODEL (
  name demo.customer_totals,
  kind FULL,
  cron '@daily',
  description 'Lifetime revenue per customer'
);

WITH totals AS (
  SELECT customer_id, sum(revenue) AS revenue, sum(events) AS events
  FROM demo.daily_revenue
  GROUP BY customer_id
)
SELECT c.customer_id, c.name, c.segment, coalesce(t.revenue, 0) AS revenue, coalesce(t.events, 0) AS events
FROM demo.customers AS c
LEFT JOIN totals AS t USING (customer_id)
