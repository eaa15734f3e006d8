"""Tools around lakehistory that a user of the package does not need: the CRMP demo source
(`generator`, the `lakehistory-demo` command) and the benchmark (`bench`)."""
