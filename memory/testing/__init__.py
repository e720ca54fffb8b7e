"""Helpers for testing code that uses the library: a scripted model server."""
