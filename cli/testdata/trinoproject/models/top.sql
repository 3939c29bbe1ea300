MODEL (
  name shop.top,
  kind VIEW
);

SELECT name, revenue FROM shop.totals ORDER BY revenue DESC LIMIT 1
