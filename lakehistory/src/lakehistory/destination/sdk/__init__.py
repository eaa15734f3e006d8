"""Fivetran's Partner SDK v2 as Python: stubs the build generates from `../proto/` (setup.py);
not kept in the repository."""
