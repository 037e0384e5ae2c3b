"""``--feed NAME=VALUE`` parsing shared by run and bench.

VALUE is a JSON-ish literal (``3``, ``2.5``, ``true``, ``[[1,2],[3,4]]``; anything else is a
string), ``@file.npy`` or ``@file.npz:key``. The dtype comes from the fed tensor (the
Session converts), so ``--feed x=3`` feeds a float32 placeholder 3.0.
"""

from __future__ import annotations

import json
from typing import Any

from dfg.graphdef.errors import UsageError


def parse_value(text: str) -> Any:
    import numpy as np

    if text.startswith("@"):
        path, _, key = text[1:].partition(":")
        if path.endswith(".npz") or key:
            try:
                with np.load(path, allow_pickle=False) as z:
                    if not key:
                        if len(z.files) != 1:
                            raise UsageError(f"{path} holds {len(z.files)} arrays; name one "
                                             f"with @{path}:KEY (keys: {', '.join(z.files)})")
                        key = z.files[0]
                    if key not in z.files:
                        raise UsageError(f"{path} has no array '{key}' (keys: "
                                         f"{', '.join(z.files)})")
                    return z[key]
            except OSError as e:
                raise UsageError(f"cannot read {path}: {e}") from None
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot read {path}: {e}") from None
    lowered = {"true": "true", "false": "false", "True": "true", "False": "false"}
    try:
        return json.loads(lowered.get(text, text))
    except json.JSONDecodeError:
        return text  # a string tensor


def parse_feeds(specs: tuple[str, ...]) -> dict[str, Any]:
    feeds: dict[str, Any] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise UsageError(f"--feed expects NAME=VALUE, found '{spec}'")
        if name in feeds:
            raise UsageError(f"--feed {name} given twice")
        feeds[name] = parse_value(value)
    return feeds


def feed_option(help: str = "NAME=VALUE: a literal, @file.npy or @file.npz:key (repeatable)."):
    import click

    return click.option("--feed", "feeds", multiple=True, metavar="NAME=VALUE", help=help)
