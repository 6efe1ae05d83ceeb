"""The ``ichor`` command."""
