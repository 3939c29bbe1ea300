MODEL (
  name shop.customers,
  kind SEED (
    path '../seeds/customers.csv'
  ),
  columns (
    customer_id INTEGER,
    name TEXT,
    segment TEXT,
    signup_date DATE
  ),
  grain (customer_id),
  description 'Customer reference data, loaded from a CSV file'
);
