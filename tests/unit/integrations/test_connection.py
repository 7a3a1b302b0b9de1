"""ConnectionSettings.from_mapping: every setting read, every refusal naming the setting as the user wrote it."""

from __future__ import annotations

import datetime as dt
import pickle
from pathlib import Path

import pytest

from jetstream_sync import errors
from jetstream_sync.integrations._connection import SETTING_KEYS, ConnectionSettings

URL = "nats://127.0.0.1:4222"
JWT_BLOCK = "-----BEGIN NATS USER JWT-----\neyJ0eXAi\n------END NATS USER JWT------\n"
SEED_BLOCK = "-----BEGIN USER NKEY SEED-----\nSUAXYZ\n------END USER NKEY SEED------\n"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory) -> dict[str, str]:
    trustme = pytest.importorskip("trustme")
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    client_cert = ca.issue_cert("client@example.org")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    client_cert.cert_chain_pems[0].write_to_path(str(directory / "client.pem"))
    client_cert.private_key_pem.write_to_path(str(directory / "client.key"))
    return {
        "TLS_CA_FILE": str(directory / "ca.pem"),
        "TLS_CERT_FILE": str(directory / "client.pem"),
        "TLS_KEY_FILE": str(directory / "client.key"),
    }


@pytest.fixture
def creds(tmp_path: Path) -> str:
    path = tmp_path / "user.creds"
    path.write_text(JWT_BLOCK + "\n" + SEED_BLOCK)
    return str(path)


@pytest.fixture
def seed_file(tmp_path: Path) -> str:
    path = tmp_path / "user.nk"
    path.write_text("SUAXYZ\n")
    return str(path)


def read(mapping: dict[str, object], **kwargs: str) -> ConnectionSettings:
    return ConnectionSettings.from_mapping(mapping, source="JETSTREAM", **kwargs)


def refused(
    error: type[Exception], mapping: object, field: str, match: str, source: str = "JETSTREAM", prefix: str = ""
) -> str:
    """Assert that reading ``mapping`` raises ``error`` naming ``field``; return the message."""
    with pytest.raises(error, match=match) as info:
        ConnectionSettings.from_mapping(mapping, source=source, prefix=prefix)  # type: ignore[arg-type]
    assert isinstance(info.value, (errors.InvalidArgumentError, errors.InvalidTypeError))
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    return str(info.value)


def test_every_setting_is_read(tls_files, creds):
    settings = read(
        {
            "SERVERS": [URL, "tls://127.0.0.2:4222"],
            "NAME": " orders-api ",
            "USER": "alice",
            "PASSWORD": " s3cret ",
            "CREDENTIALS": creds,
            **tls_files,
            "TLS_HOSTNAME": "nats.example.org",
            "CONNECT_TIMEOUT": 2,
            "TIMEOUT": dt.timedelta(seconds=7.5),
        }
    )
    assert settings == ConnectionSettings(
        servers=(URL, "tls://127.0.0.2:4222"),
        name="orders-api",
        user="alice",
        password=" s3cret ",  # secrets are kept exactly as given
        credentials=creds,
        tls_ca_file=tls_files["TLS_CA_FILE"],
        tls_cert_file=tls_files["TLS_CERT_FILE"],
        tls_key_file=tls_files["TLS_KEY_FILE"],
        tls_hostname="nats.example.org",
        connect_timeout=2.0,
        timeout=7.5,
    )
    assert settings.tls_context() is not None
    options = settings.connect_options()
    assert options.tls is not None and options.credentials == creds and options.timeout == 7.5


def test_the_other_authentications_are_read(seed_file):
    assert read({"SERVERS": URL, "TOKEN": "t0k"}).token == "t0k"
    assert read({"SERVERS": URL, "NKEY_SEED_FILE": Path(seed_file)}).nkey_seed_file == seed_file


def test_defaults_and_none_as_not_set():
    settings = read({"SERVERS": URL, "NAME": None, "TOKEN": None, "TIMEOUT": None})
    assert settings == ConnectionSettings(servers=(URL,))
    assert (settings.name, settings.token, settings.connect_timeout, settings.timeout) == (None, None, 5.0, 10.0)
    assert settings.tls_context() is None


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        (URL, (URL,)),
        (f" {URL} , nats://127.0.0.2:4222 ", (URL, "nats://127.0.0.2:4222")),
        ((URL,), (URL,)),
        (["127.0.0.1:4222", "nats://h:4222", "TLS://h:4443"], ("127.0.0.1:4222", "nats://h:4222", "tls://h:4443")),
        (["ws://h:80", "WSS://h:443"], ("ws://h:80", "wss://h:443")),  # websockets: all of them or none
    ],
)
def test_servers_as_a_string_a_comma_list_or_a_list(servers, expected):
    assert read({"SERVERS": servers}).servers == expected


def test_settings_are_hashable_picklable_and_keep_secrets_out_of_repr():
    settings = read({"SERVERS": "nats://bob:pw1@127.0.0.1:4222", "USER": "alice", "PASSWORD": "hunter2"})
    same = read({"SERVERS": ["nats://bob:pw1@127.0.0.1:4222"], "USER": "alice", "PASSWORD": "hunter2"})
    assert hash(settings) == hash(same) and {settings: 1}[same] == 1
    assert pickle.loads(pickle.dumps(settings)) == settings
    text = repr(settings)
    assert "hunter2" not in text and "pw1" not in text and "***@127.0.0.1:4222" in text
    assert "hunter2" not in repr(ConnectionSettings(servers=URL, token="hunter2"))
    assert ConnectionSettings(servers=[URL]).servers == (URL,)  # a list is kept as a tuple: still hashable


def test_with_a_prefix_only_the_prefixed_keys_are_read_and_named_with_it():
    config = {"SECRET_KEY": "x", "DEBUG": True, "JETSTREAM_SERVERS": URL, "JETSTREAM_TIMEOUT": 3}
    settings = ConnectionSettings.from_mapping(config, source="app.config", prefix="JETSTREAM_")
    assert settings == ConnectionSettings(servers=(URL,), timeout=3.0)
    message = refused(
        errors.InvalidArgumentError,
        {"JETSTREAM_SERVERS": URL, "JETSTREAM_SERVER": URL},
        "app.config['JETSTREAM_SERVER']",
        "not a connection setting",
        "app.config",
        "JETSTREAM_",
    )
    assert "JETSTREAM_SERVERS" in message
    refused(
        errors.InvalidArgumentError,
        {"DEBUG": 1},
        "app.config['JETSTREAM_SERVERS']",
        "is required",
        "app.config",
        "JETSTREAM_",
    )
    refused(
        errors.InvalidArgumentError,
        {"JETSTREAM_SERVERS": URL, "JETSTREAM_PASSWORD": "x"},
        "app.config['JETSTREAM_PASSWORD']",
        "without JETSTREAM_USER",
        "app.config",
        "JETSTREAM_",
    )


def test_the_mapping_itself_must_be_a_dict_of_string_keys():
    refused(errors.InvalidTypeError, [("SERVERS", URL)], "JETSTREAM", "must be a dict of connection settings")
    refused(errors.InvalidTypeError, {1: URL}, "JETSTREAM", "setting names must be strings")


def test_unknown_and_lower_case_keys_are_refused():
    message = refused(errors.InvalidArgumentError, {"SERVERS": URL, "HOST": "x"}, "JETSTREAM['HOST']", "remove it")
    assert all(key in message for key in SETTING_KEYS)
    refused(errors.InvalidArgumentError, {"servers": URL}, "JETSTREAM['servers']", "settings are upper case: 'SERVERS'")


@pytest.mark.parametrize(
    ("servers", "error", "match"),
    [
        (4222, errors.InvalidTypeError, "must be a URL or a list of URLs, got int"),
        (b"nats://h:4222", errors.InvalidTypeError, "got bytes"),
        ([URL, 5], errors.InvalidTypeError, "entry 1 must be a URL string, got int"),
        ([URL, " "], errors.InvalidArgumentError, "entry 1 is empty"),
        ("", errors.InvalidArgumentError, "entry 0 is empty"),
        ([], errors.InvalidArgumentError, "lists no URL"),
        ("http://alice:pw@h:4222", errors.InvalidArgumentError, "'http://\\*\\*\\*@h:4222' has the scheme 'http'"),
    ],
)
def test_bad_servers_are_refused(servers, error, match):
    message = refused(error, {"SERVERS": servers}, "JETSTREAM['SERVERS']", match)
    assert "alice" not in message and "pw" not in message


def test_servers_are_required():
    refused(errors.InvalidArgumentError, {}, "JETSTREAM['SERVERS']", "is required: the NATS URL")
    refused(errors.InvalidArgumentError, {"SERVERS": None}, "JETSTREAM['SERVERS']", "is required")


@pytest.mark.parametrize("key", ["NAME", "USER", "PASSWORD", "TOKEN", "TLS_HOSTNAME"])
def test_text_settings_must_be_non_empty_strings(key):
    mapping = {"SERVERS": URL, "USER": "u"} if key == "PASSWORD" else {"SERVERS": URL}
    refused(errors.InvalidTypeError, {**mapping, key: 5}, f"JETSTREAM['{key}']", "must be a string, got int")
    refused(errors.InvalidArgumentError, {**mapping, key: "  "}, f"JETSTREAM['{key}']", "must not be empty")


@pytest.mark.parametrize("key", ["CREDENTIALS", "NKEY_SEED_FILE", "TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"])
def test_file_settings_must_name_existing_files(key, tls_files):
    mapping: dict[str, object] = {"SERVERS": URL}
    if key == "TLS_KEY_FILE":
        mapping["TLS_CERT_FILE"] = tls_files["TLS_CERT_FILE"]
    field = f"JETSTREAM['{key}']"
    refused(errors.InvalidTypeError, {**mapping, key: 5}, field, "must be a file path \\(str or Path\\), got int")
    refused(errors.InvalidArgumentError, {**mapping, key: ""}, field, "must be a file path")
    message = refused(
        errors.InvalidArgumentError, {**mapping, key: "missing.pem"}, field, "file 'missing.pem' does not exist"
    )
    assert "relative to the working directory" in message


@pytest.mark.parametrize("key", ["CONNECT_TIMEOUT", "TIMEOUT"])
@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("5", errors.InvalidTypeError, "must be seconds"),
        (True, errors.InvalidTypeError, "must be seconds"),
        (0, errors.InvalidArgumentError, "> 0 seconds"),
        (-1.5, errors.InvalidArgumentError, "> 0 seconds"),
        (float("nan"), errors.InvalidArgumentError, "finite"),
    ],
)
def test_timeouts_must_be_positive_seconds(key, value, error, match):
    refused(error, {"SERVERS": URL, key: value}, f"JETSTREAM['{key}']", match)


def test_settings_that_need_another_or_exclude_another(creds, seed_file, tls_files):
    refused(errors.InvalidArgumentError, {"SERVERS": URL, "PASSWORD": "p"}, "JETSTREAM['PASSWORD']", "without USER")
    refused(
        errors.InvalidArgumentError,
        {"SERVERS": URL, "TLS_KEY_FILE": tls_files["TLS_KEY_FILE"]},
        "JETSTREAM['TLS_KEY_FILE']",
        "without TLS_CERT_FILE",
    )
    refused(
        errors.InvalidArgumentError,
        {"SERVERS": URL, "TOKEN": "t", "USER": "u"},
        "JETSTREAM['TOKEN']",
        "and USER are two ways to authenticate",
    )
    refused(
        errors.InvalidArgumentError,
        {"SERVERS": URL, "CREDENTIALS": creds, "NKEY_SEED_FILE": seed_file},
        "JETSTREAM['CREDENTIALS']",
        "and NKEY_SEED_FILE are two ways",
    )


def test_file_contents_are_checked_as_a_connect_would(tmp_path, tls_files):
    seed_only = tmp_path / "seed-only.creds"
    seed_only.write_text(SEED_BLOCK)
    refused(
        errors.InvalidArgumentError,
        {"SERVERS": URL, "CREDENTIALS": str(seed_only)},
        "JETSTREAM['CREDENTIALS']",
        "holds no user JWT.*nkey_seed_file",
    )
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    refused(
        errors.InvalidArgumentError,
        {"SERVERS": URL, "TLS_CA_FILE": str(junk)},
        "JETSTREAM['TLS_CA_FILE']",
        "holds no usable CA certificate",
    )
    refused(
        errors.InvalidArgumentError,
        {"SERVERS": URL, "TLS_CERT_FILE": tls_files["TLS_CERT_FILE"], "TLS_KEY_FILE": tls_files["TLS_CA_FILE"]},
        "JETSTREAM['TLS_CERT_FILE']",
        "not a usable certificate and private key",
    )


def test_connect_names_the_attribute_and_spark_its_camel_case_option(tmp_path):
    settings = ConnectionSettings(servers=(URL,), tls_ca_file=str(tmp_path / "gone.pem"))
    with pytest.raises(errors.InvalidArgumentError, match=r"^tls_ca_file: file .* does not exist on this machine"):
        settings.connect()
    pytest.importorskip("pyspark")
    from jetstream_sync.integrations.spark.options import ConnectionOptions

    options = ConnectionOptions(servers=(URL,), tls_ca_file=str(tmp_path / "gone.pem"))
    assert options.name == "jetstream-sync-spark"
    with pytest.raises(errors.InvalidArgumentError, match=r"^tlsCaFile: file .* does not exist") as info:
        options.connect()
    assert info.value.field == "tlsCaFile"
