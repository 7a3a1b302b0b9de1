"""A notebook executed by nbclient in a real Jupyter kernel (ipykernel): the cells connect, run the workload
(publish with msg_id, take one message, record it, ack) for 20 keys, block in a read that the kernel is
interrupted out of (as the stop button does: KeyboardInterrupt on the kernel's main thread), go on with the same
client, and close it. Every key stored and finished once, nothing left on the consumer, no cell failed but the
interrupted one, and that one with KeyboardInterrupt; no cell printed more than asked (a cell runs inside the
kernel's event loop, where the client's warning about blocking calls in a running loop must not show)."""

from __future__ import annotations

import pytest

from .harness import SERVED, check_outcome, require

pytestmark = pytest.mark.deployment

KEYS = [f"nb{i}" for i in range(20)] + ["after"]


def test_a_notebook_runs_the_workload_and_survives_an_interrupt(deployment):
    for module in ("nbclient", "nbformat", "ipykernel"):
        require(module)
    import nbformat
    from nbclient import NotebookClient

    cells = [
        f"import os, sys\nos.environ['NATS_URL'] = {deployment.url!r}\nsys.path.insert(0, {str(SERVED)!r})\n"
        "import workload",
        "answers = [workload.work(f'nb{i}') for i in range(20)]\nprint(sum(len(a['done']) for a in answers))",
        "quiet = workload.client().subscribe('deploy.quiet')\nquiet.next_msg(timeout=60)",  # interrupted
        "print(workload.work('after')['done'], workload.drain(), workload.client().is_connected)",
        "nc = workload.client()\nnc.close()\nprint(nc.is_closed)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.cells[2].metadata["tags"] = ["raises-exception"]
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=60,
        timeout_func=lambda cell: 2 if "raises-exception" in cell.metadata.get("tags", []) else 60,
        interrupt_on_timeout=True,
    )
    client.execute()

    outputs = [cell.outputs for cell in notebook.cells]
    assert [o.get("text") for o in outputs[1]] == ["20\n"]
    assert [o.get("ename") for o in outputs[2] if o.output_type == "error"] == ["KeyboardInterrupt"]
    assert [o.get("text") for o in outputs[3]] == ["['after'] [] True\n"]
    assert [o.get("text") for o in outputs[4]] == ["True\n"]
    assert not any(o.output_type == "error" for i, cell in enumerate(outputs) if i != 2 for o in cell)
    check_outcome(deployment.js, KEYS)
