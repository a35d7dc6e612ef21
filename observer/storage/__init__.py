"""The database boundary: the tables, their alembic migrations and the Store that reads and
writes domain types (SQLite embedded by default, PostgreSQL in the cluster)."""
