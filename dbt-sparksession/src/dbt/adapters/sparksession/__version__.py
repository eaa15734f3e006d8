from importlib import metadata

version = metadata.version("dbt-sparksession")  # the repository's VERSION, as installed
