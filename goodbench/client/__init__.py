"""Streaming client for OpenAI-compatible endpoints."""
