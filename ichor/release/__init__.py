"""Pure release rules: versions, the pinned release set, the machinery port,
the compatibility table, step checks and candidate choices. No I/O.

``versions`` reads a version as Talos machinery does; ``machinery`` (rows in
``machinery_rows``) ports Talos 1.14's UpgradeableFrom and SupportedWith; ``compat``
holds the typed compatibility table; ``steps`` checks one spec change; ``release_set``
holds the release set and the init/adopt checks; every rule answers with a ``refusals.Refusal``.
The path rules, the target rule and the choices live in ``ichor.upgrade``."""
