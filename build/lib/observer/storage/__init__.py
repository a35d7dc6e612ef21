"""The database boundary: the tables, their alembic migrations, one repository per aggregate
and the Store made of them, reading and writing domain types (SQLite embedded, PostgreSQL)."""
