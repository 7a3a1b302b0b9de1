"""Django's own cache tests (``BaseCacheTests`` of the installed Django's ``tests/cache/tests.py``) against
KeyValueCache and a real nats-server: the same cases every built-in backend passes.

Django's test file is taken from its sdist, not copied here (see djangosetup.py). Every case runs except
those in :data:`SKIPPED_CASES`. About 15 s of the run is the sleeps of Django's expiry cases.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.integrations.django.djangosetup import BUCKET, CACHE_TESTS_DIR, CACHE_TESTS_MISSING

if CACHE_TESTS_DIR is None:
    pytest.skip(f"Django's cache tests are not available: {CACHE_TESTS_MISSING}", allow_module_level=True)

from cache.tests import BaseCacheTests, caches_setting_for_tests  # Django's tests/cache, on sys.path
from django.db import connection
from django.test import TestCase, override_settings
from django.test.utils import setup_test_environment, teardown_test_environment

#: Every case of BaseCacheTests that does not run against KeyValueCache, and why. These skip themselves
#: (Django's own mechanism, as for its Redis backend): without the "cull" and "zero_cull" caches in CACHES,
#: ``caches["cull"]`` raises InvalidCacheBackendError and the case calls skipTest("Culling isn't implemented.").
SKIPPED_CASES = {
    "test_cull": "no culling: a bucket's entries leave by their TTLs, MAX_BYTES bounds it (as Django's Redis backend)",
    "test_zero_cull": "no culling (CULL_FREQUENCY is a locmem/filebased/db notion)",
    "test_cull_delete_when_store_empty": "no culling (the case sets the backend's private _max_entries)",
}
_EXCLUDED_CACHES = {"cull", "zero_cull"}


@pytest.fixture(scope="module", autouse=True)
def test_database() -> Iterator[None]:
    """The sqlite test database Django's runner would make (the model-instance cases save a Poll)."""
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    yield
    connection.creation.destroy_test_db(old_name, verbosity=0)
    teardown_test_environment()


@override_settings(
    CACHES=caches_setting_for_tests(
        BACKEND="jetstream_sync.integrations.django.cache.KeyValueCache",
        LOCATION=BUCKET,
        exclude=_EXCLUDED_CACHES,
    )
)
class KeyValueCacheTests(BaseCacheTests, TestCase):
    """BaseCacheTests on one bucket shared by the caches "default", "prefix", "v2", "custom_key" and
    "custom_key2" (as memcached or Redis is shared: no LocMem-style setUp hack is needed)."""
