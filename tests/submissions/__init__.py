"""Planted submissions for the autograde tests (built in temporary folders by the tests)."""
