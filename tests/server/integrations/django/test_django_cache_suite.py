"""Django's own cache tests (``BaseCacheTests`` of the installed Django's ``tests/cache/tests.py``) against
KeyValueCache and a real nats-server: the same cases every built-in backend passes.

They run twice: on one server (:class:`KeyValueCacheTests`), and on a 3-node cluster with a bucket of three
replicas (:class:`KeyValueCacheR3Tests`), where a replica applies each write milliseconds after it was
acknowledged, so every ``set`` then ``get`` of Django's cases checks the default READ ("read_your_writes"), and
every ``add``, ``incr`` and ``touch`` checks that a compare-and-set reads its revision from the leader.

Django's test file is taken from its sdist, not copied here (see djangosetup.py). Every case runs except
those in :data:`SKIPPED_CASES`, on both. About 15 s of each run is the sleeps of Django's expiry cases.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from tests.server.integrations.django.djangosetup import BUCKET, CACHE_TESTS_DIR, CACHE_TESTS_MISSING

if CACHE_TESTS_DIR is None:
    pytest.skip(f"Django's cache tests are not available: {CACHE_TESTS_MISSING}", allow_module_level=True)

from cache.tests import BaseCacheTests, caches_setting_for_tests  # Django's tests/cache, on sys.path
from django.core.cache import caches
from django.db import connection
from django.test import TestCase, override_settings
from django.test.utils import setup_test_environment, teardown_test_environment

from jetstream_sync.integrations.django import close_clients
from jetstream_sync.testing import EmbeddedCluster

#: Every case of BaseCacheTests that does not run against KeyValueCache (on one server or the cluster), and why.
#: These skip themselves (Django's own mechanism, as for its Redis backend): without the "cull" and "zero_cull"
#: caches in CACHES, ``caches["cull"]`` raises InvalidCacheBackendError and the case calls
#: skipTest("Culling isn't implemented.").
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


@pytest.mark.cluster
@override_settings(
    CACHES=caches_setting_for_tests(
        BACKEND="jetstream_sync.integrations.django.cache.KeyValueCache",
        LOCATION=BUCKET,
        OPTIONS={"REPLICAS": 3},
        exclude=_EXCLUDED_CACHES,
    )
)
class KeyValueCacheR3Tests(KeyValueCacheTests):
    """The same cases on an R3 bucket of a 3-node EmbeddedCluster, with the default READ: settings.JETSTREAM
    names the cluster for this class only (the other tests here keep the session's server)."""

    cluster: ClassVar[EmbeddedCluster]

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = EmbeddedCluster(3).start()
        cls.addClassCleanup(cls.cluster.stop)
        # The process client of the session's server is closed too: the next test's get_client() reconnects.
        cls.addClassCleanup(close_clients)
        # A create of an R3 stream, or a read during an election, can take longer than a single server's.
        setting: dict[str, Any] = {"SERVERS": cls.cluster.urls, "NAME": "django-cluster-tests", "TIMEOUT": 30}
        jetstream = override_settings(JETSTREAM=setting)
        jetstream.enable()
        cls.addClassCleanup(jetstream.disable)
        super().setUpClass()

    def test_the_bucket_has_three_replicas_on_the_cluster(self) -> None:
        """Not one of Django's cases: that the cases above did run on an R3 bucket of the cluster."""
        info = caches["default"].bucket.status().stream_info
        self.assertEqual(info.config.num_replicas, 3)
        self.assertEqual(len(info.cluster.replicas or []), 2)
