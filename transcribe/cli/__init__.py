"""The commands of kettle.transcribe: `kettle transcribe`, `kettle models`, and the
argparse value types every `kettle` subcommand shares."""
