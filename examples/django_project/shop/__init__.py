"""The example project's one app: a view that counts visits in the JetStream cache and publishes an order,
and the handler ``manage.py jetstream_consume`` runs on the orders."""
