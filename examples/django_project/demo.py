"""The Django integration end to end: settings checked, a view using the cache, publishing and enqueueing a
task, the ``jetstream_consume`` command fulfilling the orders in another process until SIGTERM drains it, and
``jetstream_tasks_worker`` running the receipt tasks, read back through another view.

python examples/django_project/demo.py                          # starts an embedded nats-server
python examples/django_project/demo.py nats://127.0.0.1:4222    # or use your own server (JetStream enabled)

The consume worker's output includes a traceback on purpose (the demo says so where it prints it): the handler
fails on the first delivery of the order for "flaky", the command logs the error and naks the message, and the
second delivery succeeds.

Or run the pieces yourself: NATS_URL=... python examples/django_project/manage.py runserver, and
NATS_URL=... python examples/django_project/manage.py jetstream_consume ORDERS fulfilment --handler shop.handlers.fulfil
and NATS_URL=... python examples/django_project/manage.py jetstream_tasks_worker --queue emails --threads 2
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

try:
    import django

    if django.VERSION < (6,):
        import django_tasks  # noqa: F401 - the django.tasks backport, which jetstream_tasks_worker runs on
except ModuleNotFoundError as exc:  # say which extra to install, not an ImportError traceback
    extra = "django-tasks"  # Django, and the django.tasks backport where Django is older than 6
    sys.exit(f"this example needs the {extra} extra: pip install -e '.[server,{extra}]' (no module {exc.name!r})")

from jetstream_sync.testing import ServerNotInstalledError

HERE = Path(__file__).resolve().parent
ITEMS = ["book", "lamp", "flaky", "chair"]
DELIBERATE_TRACEBACK = (
    "--- the consume worker's output (manage.py jetstream_consume). The traceback in it is deliberate: the\n"
    "    handler (shop/handlers.py) raises on the first delivery of the 'flaky' order, to show that the command logs\n"
    "    a failing handler with its traceback and naks the message, and that the server delivers it again. ---"
)


def run(url: str) -> None:
    os.environ["NATS_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    sys.path.insert(0, str(HERE))
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command
    from django.test import Client

    from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig
    from jetstream_sync.integrations.django import close_clients, get_jetstream

    call_command("check")
    js = get_jetstream()
    js.create_or_update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    js.create_or_update_consumer("ORDERS", ConsumerConfig(durable_name="fulfilment", ack_policy=AckPolicy.EXPLICIT))
    cache.delete("orders:count")

    browser = Client()
    receipts = []
    for item in ITEMS:
        answer = browser.get(f"/order/{item}/").json()
        receipts.append(answer["receipt"])
        print("GET", f"/order/{item}/", "->", answer)
    print("orders counted in the cache:", cache.get("orders:count"))

    command = ["jetstream_consume", "ORDERS", "fulfilment", "--handler", "shop.handlers.fulfil", "--workers", "2"]
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "manage.py"), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    info = js.consumer_info("ORDERS", "fulfilment")
    while info.ack_floor.stream_seq < len(ITEMS) and time.monotonic() < deadline:
        time.sleep(0.1)  # the demo polls the consumer until every order is acked (the flaky one twice delivered)
        info = js.consumer_info("ORDERS", "fulfilment")
    worker.send_signal(signal.SIGTERM)
    output, _ = worker.communicate(timeout=60)
    print(DELIBERATE_TRACEBACK)
    print(output.rstrip())
    print("--- end of the consume worker's output ---")
    print(f"worker exited {worker.returncode}; orders acked: {info.ack_floor.stream_seq} of {len(ITEMS)}")

    tasks = subprocess.Popen(
        [sys.executable, str(HERE / "manage.py"), "jetstream_tasks_worker", "--queue", "emails", "--threads", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    for result_id in receipts:
        answer = browser.get(f"/receipt/{result_id}/").json()
        while answer["status"] != "SUCCESSFUL" and time.monotonic() < deadline:
            time.sleep(0.1)  # the demo polls the result until the worker has run the task
            answer = browser.get(f"/receipt/{result_id}/").json()
        print("GET", f"/receipt/{result_id[:8]}.../", "->", answer)
    tasks.send_signal(signal.SIGTERM)
    output, _ = tasks.communicate(timeout=60)
    print(output.rstrip())
    print(f"tasks worker exited {tasks.returncode}")
    close_clients()  # before the embedded server stops (a process's client is otherwise closed at exit)


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    from jetstream_sync.testing import EmbeddedServer

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(EmbeddedServer())
        print(f"started an embedded nats-server at {server.url}")
        run(server.url)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/django_project/demo.py nats://127.0.0.1:4222")
