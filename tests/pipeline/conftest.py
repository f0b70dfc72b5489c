"""The pipeline tests use the shared database fixtures of tests/conftest.py: ``engine`` and
``database_url`` run each test on a SQLite file and on PostgreSQL."""
