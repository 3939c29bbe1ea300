MODEL (
  name shop.customers,
  kind SEED (path '../seeds/customers.csv')
);
