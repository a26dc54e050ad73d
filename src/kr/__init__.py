"""``kr``: the host-side tools (CLI, local server, evaluation) around the router core."""
