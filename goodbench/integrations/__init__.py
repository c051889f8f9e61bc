"""Integrations with other tools (locust). Nothing in goodbench imports these."""
