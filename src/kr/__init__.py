"""``kr``: the host-side tools (CLI, local server, evaluation) around the router core."""

__all__: list[str] = []
