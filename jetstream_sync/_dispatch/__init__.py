"""Where user code runs: the threads that call a user's handlers with messages, owned by the client.

- `WorkerPool` (``_pool.py``): ``workers=N`` with ``ordered_by``: a handler on N threads, fed by one reading
  thread, one key at a time in order, bounded.
- `Dispatcher` (``_dispatcher.py``): a core subscription's handler on a thread of its own (or a pool), over
  the subscription's bounded buffer; exceptions reported, never the end of the subscription.
- `LanePool` (``_lanes.py``): a service's endpoint handlers on one bounded pool of threads, each endpoint a
  `Lane` with its own concurrency limit and backlog bound; an offer past them is refused at once (never
  queued without bound, never blocking the IO thread that offers).

Consume handlers (``jetstream/consumers/delivery.py``'s ConsumeContext) run on the pool too; user callbacks of
connection events run on the runtime's callbacks thread (``_runtime/_callbacks.py``). See docs/ARCHITECTURE.md,
"Threads and ownership".
"""

from __future__ import annotations

from ._dispatcher import Dispatcher, HandlerSource
from ._lanes import Lane, LanePool
from ._pool import WorkerPool

__all__ = ["Dispatcher", "HandlerSource", "Lane", "LanePool", "WorkerPool"]
