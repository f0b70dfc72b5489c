"""The store: the database engine, its tables, its migrations and the switches kept in it."""
