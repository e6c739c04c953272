"""`kettle` and its subcommands: the only place that reads the command line."""
