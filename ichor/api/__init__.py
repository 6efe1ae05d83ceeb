"""Typed shapes of Ichor's API objects (ichor.dev/v1alpha1) and their constants. No I/O."""
