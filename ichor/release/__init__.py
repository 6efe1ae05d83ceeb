"""Pure release rules: versions, the pinned release set, the machinery port,
the compatibility table, step checks and candidate choices. No I/O."""
