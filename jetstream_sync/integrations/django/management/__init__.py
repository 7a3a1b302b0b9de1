"""Management commands of the Django app."""
