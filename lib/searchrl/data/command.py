"""`searchrl data`: the papers' datasets and corpora by name.

    searchrl data list                      every entry: the profiles that need it, present or not, where, sizes
    searchrl data fetch NAME [--yes]        download it (sizes first, then asks; resumable, verified after)
    searchrl data prepare NAME              write the layout the loaders read from what was fetched

Files go to $SEARCHRL_DATA (default ~/.cache/searchrl/data); entries are also found in ../shared/data.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from searchrl.data.catalog import CATALOG, DATA_ENV_VAR, MissingDataError, data_dirs, entry, write_dir
from searchrl.data.fetch import fetch, human_bytes, status
from searchrl.data.hub import DownloadError, VerificationError
from searchrl.data.prepare import prepare

__all__ = ["list_table", "main"]


def list_table() -> str:
    rows = [("name", "kind", "needed by", "present", "where", "on disk", "expected")]
    for s in status():
        e = s.entry
        rows.append((e.name, e.kind, ", ".join(e.profiles) or "-", s.present, s.where,
                     human_bytes(s.bytes_on_disk) if s.bytes_on_disk else "-", human_bytes(e.approx_bytes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    folders = " then ".join(str(d) for d in data_dirs())
    where = f"data folders: {folders} (fetch and prepare write to {write_dir()}; set ${DATA_ENV_VAR} to change it)"
    return "\n".join([*lines, "", where])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="searchrl data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="every entry, the profiles that need it, whether it is here")
    for action, what in (("fetch", "download an entry"), ("prepare", "write the layout loaders read")):
        p = sub.add_parser(action, help=what)
        p.add_argument("name", help=f"one of: {', '.join(CATALOG)}")
        p.add_argument("--yes", "-y", action="store_true", help="do not ask before downloading")
    sub.add_parser("describe", help="each entry's source, licence and prepared layout")
    return parser


def _describe() -> str:
    out = []
    for e in CATALOG.values():
        layout = "; ".join(f"{part}: {paths[0]}" for part, paths in e.layout.items())
        out.append(f"{e.name} ({e.kind}, ~{human_bytes(e.approx_bytes)}): {e.description}\n  source: {e.source}\n"
                   f"  licence: {e.licence}\n  layout: {layout}" + (f"\n  by hand: {e.manual}" if e.manual else ""))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.action == "list":
            print(list_table())
        elif args.action == "describe":
            print(_describe())
        elif args.action == "fetch":
            fetched = fetch(args.name, yes=args.yes)
            e = entry(args.name)
            if fetched and e.prepare:
                print(f"fetched; now run `searchrl data prepare {args.name}`")
        else:
            for part, path in prepare(args.name).items():
                print(f"{args.name} {part}: {path}")
    except (KeyError, ValueError, MissingDataError, DownloadError, VerificationError, NotImplementedError) as err:
        print(f"searchrl data {args.action}: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
