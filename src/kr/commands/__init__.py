"""The ``kr`` commands, one module each; ``kr.cli`` parses the arguments and maps errors to exits.

Each command module has ``run(args)``, which reads the parsed arguments, does the work through
plain-value functions (which tests and other commands call directly) and prints the outcome.
"""

__all__: list[str] = []
