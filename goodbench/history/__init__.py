"""Performance over time (docs/history.md): every finished run indexed in a catalogue (catalogue.py,
scan.py) by its identity (identity.py) and provenance (provenance.py); series queried (query.py), their
change points found (changepoint.py) and a new run judged against its series (verdict.py)."""
