"""The Python client of kettle's own protocol, with reconnect and resume. Imports nothing else
of kettle.streaming."""
