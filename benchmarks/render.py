"""Benchmark: what the rendering budgets (pools/engine/sandbox.py) cost an ordinary render, and what they save on a
hostile one.

Usage, from the project root (a few seconds; pure Python, no database):

    .venv/bin/python benchmarks/render.py [--repeat 2000]

1. An ordinary OSMO workflow file (placeholders, a filter, a loop, a macro; about 1 KB) rendered --repeat times
   in the budgeted sandbox, against jinja2's own SandboxedEnvironment rendering the same text in the same run
   (the baseline: what rendering cost before the budgets). Both compile once, as the pod-template cache does.
2. The findings of issue 25, each rendered once in the budgeted sandbox: time to refusal and peak memory
   (tracemalloc), beside the same template scaled down on jinja2's sandbox (a tenth of the string, a
   10,000th of the loop turns; at full size it took 1.66 GB or ran for hours, so the baseline is kept small).
"""

import argparse
import statistics
import time
import tracemalloc

from jinja2.sandbox import SandboxedEnvironment

from pools.engine.sandbox import BudgetExceeded, budget, stream
from pools.engine.sandbox import environment as budgeted

ORDINARY = """version: 2
workflow:
  name: {{ name }}
  resources:
    default: {cpu: {{ cpu }}, gpu: {{ gpu }}, memory: {{ memory }}}
{% macro task(i) %}  - name: worker-{{ i }}
    image: {{ image }}
    command: [python, train.py, "--rank={{ i }}", "--data={{ dataset|lower }}"]
{% endmacro %}  groups:
  - name: train
    tasks:
{% for i in range(workers) %}{{ task(i) }}{% endfor %}
"""
VARIABLES = {"name": "sim-train", "cpu": 8, "gpu": 1, "memory": "64Gi", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
             "dataset": "ImageNet", "workers": 8}

HOSTILE = {
    "'A' * 300000000": ("{{ 'A' * 300000000 }}", "{{ 'A' * 30000000 }}"),
    "nested range() loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                             "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"),
    "7 ** 6000": ("{{ 7 ** 6000 }}", "{{ (7 ** 6000) % 10 }}"),
}


def per_render(render, repeat: int) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            render()
        samples.append((time.perf_counter() - start) / repeat)
    return statistics.median(samples)


def measured(action) -> tuple[float, int, str]:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        action()
        outcome = "rendered"
    except BudgetExceeded as exc:
        outcome = f"refused ({exc.limit})"
    except Exception as exc:  # the baseline's own errors
        outcome = type(exc).__name__
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2000)
    repeat = parser.parse_args().repeat
    plain = SandboxedEnvironment(keep_trailing_newline=True)
    plain_template, budgeted_template = plain.from_string(ORDINARY), budgeted.from_string(ORDINARY)
    assert plain_template.render(VARIABLES) == stream_once(budgeted_template)
    base = per_render(lambda: plain_template.render(VARIABLES), repeat)
    ours = per_render(lambda: stream_once(budgeted_template), repeat)
    print(f"ordinary workflow ({len(ORDINARY)} bytes, {repeat} renders x 5, median): budgeted {ours * 1e6:.0f} us, "
          f"jinja2's sandbox {base * 1e6:.0f} us, ratio {ours / base:.2f}")
    for name, (full, small) in HOSTILE.items():
        elapsed, peak, outcome = measured(lambda full=full: stream_once(budgeted.from_string(full)))
        base_elapsed, base_peak, base_outcome = measured(lambda small=small: plain.from_string(small).render())
        print(f"{name}: budgeted {outcome} in {elapsed * 1e3:.1f} ms, peak {peak / 1e6:.2f} MB; jinja2's sandbox "
              f"scaled down {base_outcome} in {base_elapsed * 1e3:.1f} ms, peak {base_peak / 1e6:.2f} MB")


def stream_once(template) -> str:
    with budget():
        return stream(template, VARIABLES)


if __name__ == "__main__":
    main()
