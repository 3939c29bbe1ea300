MODEL (
  name shop.top_customers,
  kind VIEW,
  description 'The three customers with the most revenue'
);

SELECT customer_id, name, segment, revenue
FROM shop.customer_totals
ORDER BY revenue DESC, customer_id
LIMIT 3
