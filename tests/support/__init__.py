"""Helpers shared by the component tests of several folders (not fixtures: plain code)."""
