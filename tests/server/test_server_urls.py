"""connect()'s server URLs: a URL no NATS server can have is refused before any connection attempt, naming the
accepted schemes (it used to surface as a DNS failure, "Name or service not known", in a NoServersError), and
a comma-separated string is a list of servers, as the integrations' SERVERS setting takes it."""

from __future__ import annotations

import pickle

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.integrations.flask import JetStream
from tests.helpers import our_threads, wait_until

ACCEPTED = ("nats://", "tls://", "ws://", "wss://")


@pytest.mark.parametrize(
    ("template", "scheme"),
    [
        ("http://{}", "http"),
        ("https://{}", "https"),
        ("nat://{}", "nat"),
        ("NAST://{}", "NAST"),
        ("tcp:/{}", "tcp"),
        ("nats//{}", ""),
        ("nats:{}", "nats"),
    ],
)
def test_a_url_no_server_can_have_is_refused_before_connecting(nats_server, template, scheme):
    url = template.format(nats_server.url.partition("://")[2])
    before = set(our_threads())
    with pytest.raises(errors.InvalidServerURLError) as info:
        jetstream_sync.connect(url, connect_timeout=1, max_reconnect_attempts=0)
    error = info.value
    assert isinstance(error, errors.InvalidArgumentError) and isinstance(error, ValueError)
    assert (error.field, error.url, error.scheme) == ("servers", url, scheme)
    assert all(accepted in str(error) for accepted in ACCEPTED), str(error)
    assert "Name or service" not in str(error)
    assert set(our_threads()) <= before  # nothing was started: no attempt was made
    copy = pickle.loads(pickle.dumps(error))  # a process pool sends errors back pickled
    assert (type(copy), str(copy), copy.url) == (type(error), str(error), error.url)


def test_the_bad_entry_of_a_list_is_named_without_credentials(nats_server):
    with pytest.raises(errors.InvalidServerURLError, match=r"'http://\*\*\*@h:4222' has the scheme 'http'") as info:
        jetstream_sync.connect([nats_server.url, "http://alice:s3cret@h:4222"])
    assert "s3cret" not in str(info.value) and "alice" not in str(info.value)


def test_a_comma_separated_string_is_a_list_of_servers(nats_server, unused_port):
    refused = f"nats://127.0.0.1:{unused_port}"  # nothing listens: the client goes on to the next
    with jetstream_sync.connect(f"{refused}, {nats_server.url}", connect_timeout=1, dont_randomize=True) as nc:
        assert nc.options.servers == (refused, nats_server.url)
        assert nc.connected_url == nats_server.url
        assert {refused, nats_server.url} <= set(nc.servers)
        nc.publish("urls.ok", b"x")
        nc.flush()
    wait_until(lambda: nc.is_closed)


def test_the_flask_setting_refuses_the_same_urls_with_the_same_error(nats_server):
    import flask

    app = flask.Flask("urls")
    app.config["JETSTREAM_SERVERS"] = f"{nats_server.url},nat://127.0.0.1:4222"
    with pytest.raises(errors.InvalidServerURLError, match=r"\['JETSTREAM_SERVERS'\]: 'nat://127.0.0.1:4222'"):
        JetStream(app)


def test_sparks_servers_option_is_read_by_the_same_parser():
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("pyarrow", reason="the spark extra is not installed")
    from jetstream_sync.integrations.spark.options import parse_read_options

    options = parse_read_options({"servers": "nats://a:4222, nats://b:4222", "stream": "S"}, streaming=False)
    assert options.connection.servers == ("nats://a:4222", "nats://b:4222")
    with pytest.raises(errors.InvalidServerURLError, match="'http://b:4222' has the scheme 'http'"):
        parse_read_options({"servers": "nats://a:4222,http://b:4222", "stream": "S"}, streaming=False)


def test_a_scheme_in_capitals_connects(nats_server):
    """nats-py knows the schemes in lower case only: before, ``NATS://host:port`` failed as a DNS error."""
    with jetstream_sync.connect(nats_server.url.replace("nats://", "NATS://")) as nc:
        assert nc.is_connected
