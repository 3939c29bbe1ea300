MODEL (
  name demo.customers,
  kind SEED (path '../seeds/customers.csv'),
  description 'Customer reference data, loaded from a CSV file'
);
