"""`lakehistory`: inspect a project's history from the command line (cli.py)."""
