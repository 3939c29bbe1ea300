MODEL (
  name shop.customer_totals,
  kind FULL,
  cron '@daily',
  grain (customer_id),
  description 'Lifetime events and revenue per customer'
);

SELECT
  c.customer_id,
  c.name,
  c.segment,
  count(e.event_id) AS events,
  coalesce(sum(e.amount), 0) AS revenue
FROM shop.customers AS c
LEFT JOIN shop.events AS e
  ON e.customer_id = c.customer_id
GROUP BY 1, 2, 3
