"""``gpurt bench``: one command per benchmark; the measuring code lives in the ``bench`` package."""

from __future__ import annotations

import typer

from gpurt.cli.bench import broker, cache, client, kernels, queues, runtime, scaling, utilization

bench_app = typer.Typer(help="Benchmarks: figures are printed and can be written to BENCHMARKS.md.",
                        no_args_is_help=True)
bench_app.command("kernels")(kernels.bench_kernels)
bench_app.command("accuracy")(kernels.bench_accuracy)
bench_app.command("runtime")(runtime.bench_runtime)
bench_app.command("emulator")(broker.bench_emulator)
bench_app.command("scaling")(scaling.bench_scaling)
bench_app.command("client")(client.bench_client)
bench_app.command("utilization")(utilization.bench_utilization)
bench_app.command("cache")(cache.bench_cache)
bench_app.command("queues")(queues.bench_queues)
