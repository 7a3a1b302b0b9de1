"""The credentials a CONNECT carries that nats-py does not make itself: callbacks read at every connection
attempt, and JWTs and seeds held in memory.

nats-py takes a user/password, a token, a .creds file, or an nkey seed (string or file), and signs the
server's nonce with them itself. Everything else is made here, once per attempt, after the server's INFO
(which holds the nonce) and before the CONNECT is written (``NatsConnection._process_info`` and
``_connect_command``):

- ``token_callback()`` and ``user_info_callback()`` (nats.go's TokenHandler and UserInfoHandler): read at every
  attempt, so a rotated secret needs no restart;
- ``user_jwt`` or ``user_jwt_callback()`` (nats.go's UserJWT), signed for by ``nkey_seed`` / ``nkey_seed_file``
  (nats.go's UserJWTAndSeed) or ``signature_callback(nonce)``; ``credentials_data`` (the text of a .creds
  file, nats.go's UserCredentialBytes) is a JWT and its seed;
- ``nkey`` with ``signature_callback`` (nats.go's Nkey): the seed never enters the process (an HSM, a KMS).

User functions run on the connect thread with the attempt's ``connect_timeout`` as their bound
(``_usercode.py``); what they return is checked, and a wrong value fails the attempt with a
ConnectCallbackError that says what was expected, never what was returned (it may be a secret). The values
live only until the CONNECT is built; nothing here logs them.
"""

from __future__ import annotations

import base64
import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import errors
from ._usercode import BlockingCalls

if TYPE_CHECKING:
    from ..options import ConnectOptions

__all__ = ["ConnectAuth", "split_credentials"]

# A .creds file: the JWT between its BEGIN/END lines, then the seed between its own (the shape nsc writes).
_BLOCK = re.compile(r"-{3,}[^\n]*BEGIN ([A-Z ]+?)-{3,}\s*\n\s*(\S+)\s*\n\s*-{3,}[^\n]*END [^\n]*-{3,}")


def split_credentials(text: str) -> tuple[str, str] | None:
    """The user JWT and the user seed in the text of a .creds file, or None when either is missing."""
    blocks = {kind.strip(): value for kind, value in _BLOCK.findall(text)}
    jwt, seed = blocks.get("NATS USER JWT"), blocks.get("USER NKEY SEED")
    return (jwt, seed) if jwt and seed else None


def _text_from(what: str, value: object, meaning: str) -> str:
    """A callback's value as the str the CONNECT needs; never shows the value in the error (a secret)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str) or not value.strip():
        shown = "an empty string" if isinstance(value, str) else type(value).__name__
        raise errors.ConnectCallbackError(f"{what} returned {shown}; it must return {meaning} as a non-empty str")
    return value.strip()


class ConnectAuth:
    """Builds the CONNECT's auth fields for one attempt (see the module docstring). IO thread."""

    def __init__(self, options: ConnectOptions, calls: BlockingCalls) -> None:
        self._options = options
        self._calls = calls
        self._static_jwt, self._static_seed = options.user_jwt, options.nkey_seed
        if options.credentials_data is not None:
            pair = split_credentials(options.credentials_data)
            if pair is not None:  # checked by ConnectOptions already
                self._static_jwt, self._static_seed = pair

    @staticmethod
    def wanted(options: ConnectOptions) -> bool:
        """Whether any of the credentials made here are configured (else nats-py does all of it)."""
        return any(
            value is not None
            for value in (
                options.token_callback,
                options.user_info_callback,
                options.user_jwt,
                options.user_jwt_callback,
                options.signature_callback,
                options.credentials_data,
            )
        )

    @staticmethod
    def signs_for_nats_py(options: ConnectOptions) -> bool:
        """Whether nats-py may sign with ``nkey_seed``/``nkey_seed_file`` itself (nkey auth): not when a JWT
        is given, which this class signs for."""
        return options.user_jwt is None and options.user_jwt_callback is None and options.credentials_data is None

    async def fields(self, nonce: str | None, timeout: float) -> dict[str, str]:
        """IO thread: the auth fields of this attempt's CONNECT (``auth_token``, ``user``/``pass``, ``jwt``,
        ``nkey``, ``sig``). ConnectCallbackError when a user function fails; InvalidArgumentError when a seed
        is not usable."""
        opts, calls = self._options, self._calls
        fields: dict[str, str] = {}
        if opts.token_callback is not None:
            token = await calls.run("token_callback", opts.token_callback, timeout=timeout)
            fields["auth_token"] = _text_from("token_callback", token, "the token")
        if opts.user_info_callback is not None:
            pair = await calls.run("user_info_callback", opts.user_info_callback, timeout=timeout)
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise errors.ConnectCallbackError(
                    f"user_info_callback returned {type(pair).__name__}; it must return a (user, password) tuple"
                )
            fields["user"] = _text_from("user_info_callback", pair[0], "the user")
            fields["pass"] = _text_from("user_info_callback", pair[1], "the password")
        jwt = self._static_jwt
        if opts.user_jwt_callback is not None:
            value = await calls.run("user_jwt_callback", opts.user_jwt_callback, timeout=timeout)
            jwt = _text_from("user_jwt_callback", value, "the user JWT")
        if jwt is None and opts.nkey is None:
            return fields
        if jwt is not None:
            fields["jwt"] = jwt
        else:
            fields["nkey"] = str(opts.nkey)
        if nonce is not None:  # a server that authenticates JWTs or nkeys always sends one
            signature = await self._sign(nonce.encode(), timeout)
            fields["sig"] = base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
        return fields

    async def _sign(self, nonce: bytes, timeout: float) -> bytes:
        callback = self._options.signature_callback
        if callback is not None:
            signature = await self._calls.run("signature_callback", callback, nonce, timeout=timeout)
            if not isinstance(signature, (bytes, bytearray)) or len(signature) != 64:
                shown = f"{len(signature)} bytes" if isinstance(signature, (bytes, bytearray)) else type(signature)
                raise errors.ConnectCallbackError(
                    f"signature_callback returned {shown}; it must return the raw 64-byte ed25519 signature of "
                    "the nonce (what nkeys' KeyPair.sign returns), not an encoded one"
                )
            return bytes(signature)
        return _sign_with_seed(self._seed(), nonce)

    def _seed(self) -> tuple[str, str]:
        """The seed to sign with, and the option it came from; a seed file is read at every attempt."""
        if self._static_seed is not None:
            return self._static_seed, "credentials_data" if self._options.credentials_data else "nkey_seed"
        path = self._options.nkey_seed_file
        if path is None:  # ConnectOptions refuses a JWT without a way to sign for it
            raise errors.InvalidArgumentError("user_jwt", "needs nkey_seed, nkey_seed_file or signature_callback")
        try:
            with open(path, encoding="utf-8") as file:
                return file.read(), "nkey_seed_file"
        except OSError as exc:
            raise errors.InvalidArgumentError("nkey_seed_file", f"cannot be read: {exc.strerror}") from None


def _sign_with_seed(source: tuple[str, str], nonce: bytes) -> bytes:
    seed, field = source
    try:
        nkeys: Any = importlib.import_module("nkeys")
    except ImportError as exc:
        raise errors.InvalidArgumentError(field, f"needs the nkeys package: pip install nkeys ({exc})") from None
    try:
        pair = nkeys.from_seed(bytearray(seed.strip().encode()))
    except Exception as exc:  # nkeys' errors never hold the seed
        raise errors.InvalidArgumentError(field, f"is not a usable nkey seed: {type(exc).__name__}") from None
    try:
        sign: Callable[[bytes], bytes] = pair.sign
        return sign(nonce)
    finally:
        pair.wipe()
