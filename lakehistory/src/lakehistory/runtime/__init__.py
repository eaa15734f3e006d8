"""Where the project keeps its local state, and how it gets the Delta Lake jars."""
