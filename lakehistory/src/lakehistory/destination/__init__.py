"""`lakehistory destination`: Fivetran's Partner SDK destination, which lands each write request
Fivetran sends as a batch of the landing format (docs/landing-format.md) for `dbt run` to apply.
README "lakehistory destination" says how to run it beside dbt."""
