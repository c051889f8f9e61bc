"""Rendering of results: console (rich), plots and HTML."""
