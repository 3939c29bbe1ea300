MODEL (
  name shop.totals,
  kind FULL
);

SELECT c.customer_id, c.name, coalesce(sum(d.revenue), 0) AS revenue
FROM shop.customers AS c LEFT JOIN shop.daily AS d ON d.customer_id = c.customer_id
GROUP BY 1, 2
