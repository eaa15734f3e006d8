"""Operations that write to history tables on request (dbt run-operations): revert and undo."""
