"""The `kafka_bootstrap` session fixture lives in tests/conftest.py, shared with tests/tablestore and tests/catalog."""
