"""ConnectOptions: connect()'s keywords, defined and validated once; secrets stay out of repr."""

from __future__ import annotations

import ssl

import pytest

from jetstream_sync import ConnectOptions, connect, errors


def test_defaults():
    opts = ConnectOptions()
    assert opts.servers == ("nats://127.0.0.1:4222",)
    assert (opts.timeout, opts.default_timeout, opts.connect_timeout) == (5.0, 5.0, 2.0)
    assert (opts.max_reconnect_attempts, opts.reconnect_wait, opts.inbox_prefix) == (60, 2.0, "_INBOX")


def test_servers_accept_one_url_or_a_list():
    assert ConnectOptions(servers="nats://a:1").servers == ("nats://a:1",)
    assert ConnectOptions(servers=["nats://a:1", "nats://b:2"]).servers == ("nats://a:1", "nats://b:2")


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"servers": []}, errors.InvalidArgumentError, "servers"),
        ({"servers": [""]}, errors.InvalidArgumentError, "servers"),
        ({"servers": 5}, errors.InvalidArgumentError, "servers"),
        ({"tls": "yes"}, errors.InvalidTypeError, "tls"),
        ({"credentials": "/no/such/file.creds"}, errors.InvalidArgumentError, "credentials"),
        ({"nkey_seed_file": 3}, errors.InvalidTypeError, "nkey_seed_file"),
        ({"password": "p"}, errors.InvalidArgumentError, "password"),
        ({"connect_timeout": 0}, errors.InvalidArgumentError, "connect_timeout"),
        ({"timeout": "5"}, errors.InvalidTypeError, "timeout"),
        ({"reconnect_wait": -1}, errors.InvalidArgumentError, "reconnect_wait"),
        ({"max_reconnect_attempts": 1.5}, errors.InvalidTypeError, "max_reconnect_attempts"),
        ({"max_reconnect_attempts": True}, errors.InvalidTypeError, "max_reconnect_attempts"),
        ({"pending_size": -1}, errors.InvalidArgumentError, "pending_size"),
        ({"max_outstanding_pings": 0}, errors.InvalidArgumentError, "max_outstanding_pings"),
        ({"inbox_prefix": "a b"}, errors.InvalidArgumentError, "inbox_prefix"),
        ({"name": 7}, errors.InvalidTypeError, "name"),
        ({"error_callback": "log"}, errors.InvalidTypeError, "error_callback"),
    ],
)
def test_bad_options_raise_typed_errors_naming_the_option(kwargs, error, field):
    with pytest.raises(error) as info:
        ConnectOptions(**kwargs)
    assert info.value.field == field


def test_coroutine_callbacks_are_refused():
    async def on_error(exc):
        return None

    with pytest.raises(errors.InvalidTypeError, match="plain function"):
        ConnectOptions(error_callback=on_error)


def test_connect_validates_through_the_same_type_before_connecting():
    # nothing listens on port 1: a validation error must come first, without any connection attempt
    with pytest.raises(errors.InvalidArgumentError) as info:
        connect("nats://127.0.0.1:1", pending_size=-1)
    assert info.value.field == "pending_size"


def test_connect_names_an_unknown_keyword_and_lists_the_known():
    with pytest.raises(errors.InvalidArgumentError) as info:
        connect("nats://127.0.0.1:1", time_out=3)
    assert info.value.field == "time_out"
    assert "connect_timeout" in str(info.value) and "timeout" in str(info.value)


def test_client_wants_connect_options():
    from jetstream_sync import Client

    with pytest.raises(errors.InvalidTypeError) as info:
        Client({"servers": "nats://127.0.0.1:1"})  # type: ignore[arg-type]
    assert info.value.field == "options"


def test_secrets_stay_out_of_repr():
    opts = ConnectOptions(
        servers="nats://alice:s3cret@127.0.0.1:4222", user="u", password="hunter2", token="t0ken", nkey_seed="SUAXYZ"
    )
    text = repr(opts)
    for secret in ("s3cret", "hunter2", "t0ken", "SUAXYZ"):
        assert secret not in text
    assert "***@127.0.0.1:4222" in text


def test_tls_context_is_kept():
    ctx = ssl.create_default_context()
    assert ConnectOptions(tls=ctx).tls is ctx


@pytest.mark.parametrize("bad", ["", "  ", None, 5])
def test_a_bad_server_entry_is_named_without_showing_another_entrys_credentials(bad):
    with pytest.raises(errors.InvalidArgumentError, match="entry 1") as info:
        ConnectOptions(servers=["nats://alice:s3cr3t@127.0.0.1:4222", bad])
    assert "s3cr3t" not in str(info.value) and "alice" not in str(info.value)


def test_a_bad_servers_value_is_shown_redacted():
    with pytest.raises(errors.InvalidArgumentError) as info:
        ConnectOptions(servers=[])
    assert "list of 0" in str(info.value)


SEED_BLOCK = "-----BEGIN USER NKEY SEED-----\nSUAXYZ\n------END USER NKEY SEED------\n"
JWT_BLOCK = "-----BEGIN NATS USER JWT-----\neyJ0eXAi\n------END NATS USER JWT------\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (SEED_BLOCK, "no user JWT.*nkey_seed_file"),
        (JWT_BLOCK, "no user seed"),
        ("", "no user JWT"),
    ],
)
def test_a_credentials_file_without_its_parts_is_refused_up_front(tmp_path, text, match):
    creds = tmp_path / "user.creds"
    creds.write_text(text)
    with pytest.raises(errors.InvalidArgumentError, match=match) as info:
        ConnectOptions(credentials=str(creds))
    assert info.value.field == "credentials"
    assert "SUAXYZ" not in str(info.value)


def test_a_complete_credentials_file_is_accepted(tmp_path):
    creds = tmp_path / "user.creds"
    creds.write_text(JWT_BLOCK + SEED_BLOCK)
    assert ConnectOptions(credentials=str(creds)).credentials == str(creds)
