"""The test suite: folders mirror the packages of ``src/`` (see each folder's ``__init__``)."""
