MODEL (
  name demo.top_customers,
  kind VIEW,
  description 'The three customers with the most revenue'
);

SELECT name, segment, revenue
FROM demo.customer_totals
ORDER BY revenue DESC
LIMIT 3
