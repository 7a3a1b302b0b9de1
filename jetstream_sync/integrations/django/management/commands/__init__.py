"""``manage.py jetstream_consume``."""
