"""Every console script is a Hydra app over the one config tree (``vlarl_trainer.config``).

Hydra's flags work as its users expect: ``--help`` lists the recipes and job sizes, ``--cfg job``
prints the composed tree, ``-m runner.seed=0,1,2`` runs one job per value, one after another.
A command exits 0 when it finishes, 2 on a bad setting or an existing run directory, 1 when a
worker fails or hangs, 143 or 130 when SIGTERM or SIGINT stopped it (after a checkpoint, with the
command that continues it); its message starts with the command's name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from vlarl_trainer.config import CONFIG_MODULE, VlarlConfig, check_choices, store_schema, to_config
from vlarl_trainer.run_dirs import check_run_name

Command = Callable[[VlarlConfig, list[str]], None]
"""What a command does with the composed config and the ``key=value`` overrides it was given."""

INFO_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve", "--shell-completion", "-sc")
"""Hydra flags that print and run nothing, so they need no recipe."""
DRY_RUN_FLAG = "--dry-run"


def choice_overrides(args: list[str]) -> list[str]:
    """The ``recipe=``/``job=``/``resume=`` arguments, a sweep's comma list split into one per value."""
    chosen = []
    for arg in args:
        if arg.startswith(("recipe=", "job=", "resume=")):
            key, values = arg.split("=", 1)
            chosen += [f"{key}={value}" for value in values.split(",")] if key != "resume" else [arg]
    return chosen


def with_job_name(args: list[str], name: str) -> list[str]:
    """``args`` with ``hydra.job.name=<name>`` (what --help calls the app) among their ``key=value``
    overrides: argparse takes the overrides as one run of positional arguments, so it joins that run."""
    first = next((index for index, arg in enumerate(args) if "=" in arg and not arg.startswith("-")), len(args))
    return [*args[:first], f"hydra.job.name={name}", *args[first:]]


def hydra_command(name: str, command: Command, need_recipe: bool = True,
                  dry_run: Command | None = None) -> Callable[[list[str] | None], int]:
    """The console-script entry point ``main(argv=None) -> exit code`` of one vlarl command; with
    ``dry_run``, the flag ``--dry-run`` runs that instead of ``command``."""
    import hydra

    from vlarl_trainer.rl.cluster import WorkerFailure
    from vlarl_trainer.rl.stopping import RunStopped

    def hydra_app(run: Command):
        """Hydra's app that composes the config and hands it to ``run``, mapping errors to exit codes."""

        def task(composed) -> None:
            from hydra.core.hydra_config import HydraConfig

            settings = HydraConfig.get()
            overrides = list(settings.overrides.task)
            try:
                config = to_config(composed)
                check_run_name(config.runner.name)
                run(config, overrides)
            except (ValueError, FileExistsError, FileNotFoundError, ImportError) as error:
                print(f"{name}: {error}", file=sys.stderr)
                raise SystemExit(2) from None
            except WorkerFailure as error:
                print(f"{name}: {error}", file=sys.stderr)
                raise SystemExit(1) from None
            except RunStopped as stop:
                print(f"{name}: {stop}\ncontinue with: {name} resume={stop.resume_dir}", file=sys.stderr)
                raise SystemExit(stop.exit_code) from None

        return hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base=None)(task)

    def main(argv: list[str] | None = None) -> int:
        from hydra.core.global_hydra import GlobalHydra

        args = list(sys.argv[1:] if argv is None else argv)
        run = command
        if DRY_RUN_FLAG in args:
            if dry_run is None:
                print(f"{name}: {DRY_RUN_FLAG} is a flag of vlarl-train only", file=sys.stderr)
                return 2
            args.remove(DRY_RUN_FLAG)
            run = dry_run
        try:
            check_choices(choice_overrides(args), need_recipe and not any(a in INFO_FLAGS for a in args))
        except ValueError as error:
            print(f"{name}: {error}", file=sys.stderr)
            return 2
        store_schema()
        saved_argv = sys.argv
        sys.argv = [name, *with_job_name(args, name)]
        try:
            hydra_app(run)()
        except SystemExit as stop:
            return stop.code if isinstance(stop.code, int) else 1
        finally:
            sys.argv = saved_argv
            GlobalHydra.instance().clear()
        return 0

    return main
