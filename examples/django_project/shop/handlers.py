"""The handler of ``manage.py jetstream_consume ORDERS fulfilment --handler shop.handlers.fulfil``.

It returns normally, so the command acks each order. An order for "flaky" fails on its first delivery, to show
what a raising handler means: the command logs it and naks the message, and the server delivers it again.
"""

from __future__ import annotations

import json
import logging

from jetstream_sync import Msg

log = logging.getLogger("shop")


def fulfil(msg: Msg) -> None:
    order = json.loads(msg.data)
    delivery = msg.metadata.num_delivered
    if order["item"] == "flaky" and delivery == 1:
        raise RuntimeError("the warehouse did not answer")
    log.info("fulfilled order %d (%s), delivery %d", order["n"], order["item"], delivery)
