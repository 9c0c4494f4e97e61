"""Applications the integration tests run as instance processes."""
