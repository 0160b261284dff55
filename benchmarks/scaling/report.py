"""The table of a scale run and the soak series of its largest level."""

from __future__ import annotations

from scaling.results import LegResult, pct


def print_table(results: list[LegResult]) -> None:
    head = (
        f"{'leg':<12}{'in flight':>10}{'episodes':>9}{'ok':>7}{'success':>9}"
        f"{'eps/s':>8}{'p50 step':>10}{'p99 step':>10}{'p99/raw':>8}"
        f"{'wall/floor':>11}{'peak MB':>9}{'servers MB':>11}{'servers':>8}"
        f"{'left':>5}"
    )
    print(head)
    raw = {r.level: pct(r.step_s, 0.99) for r in results if r.leg == "raw"}
    raw |= {r.level: pct(r.step_s, 0.99) for r in results if r.leg == "raw-paced"}
    floor = {r.level: r for r in results if r.leg == "floor"}
    for r in results:
        p99 = pct(r.step_s, 0.99)
        baseline = r.leg.startswith("raw") or not r.step_s or r.level not in raw
        ratio = "" if baseline else f"{p99 / raw[r.level]:.2f}x"
        base = floor.get(r.level)
        over_floor = (
            f"{r.wall_s / base.wall_s:.2f}x"
            if r.leg in ("vf04", "vf04-server") and base and base.ok == base.episodes
            else ""
        )
        print(
            f"{r.leg:<12}{r.level:>10}{r.episodes:>9}{r.ok:>7}"
            f"{100 * r.ok / r.episodes:>8.1f}%{r.ok / r.wall_s:>8.1f}"
            f"{1e3 * pct(r.step_s, 0.5):>8.1f}ms{1e3 * p99:>8.1f}ms{ratio:>8}"
            f"{over_floor:>11}{r.peak_main_mb:>9.0f}{r.peak_servers_mb:>11.0f}{r.servers:>8}"
            f"{r.left:>5}"
        )
    for r in results:
        kinds = sorted(set(r.errors))
        if kinds:
            print(f"  {r.leg} @ {r.level}: {len(r.errors)} errors: {kinds[:5]}")


def print_costs(results: list[LegResult]) -> None:
    """What each leg cost: CPU seconds per episode (its own processes / its env
    servers), memory and open files per episode in flight at their peak, the
    largest load average it ran under; then, per level, the additive limit
    `1 / (1 / floor + 1 / raw)` episodes/s and the `vf04` leg's share of it."""
    print(
        f"\n{'leg':<12}{'in flight':>10}{'CPU s/ep':>9}{'servers':>8}"
        f"{'MB/in flight':>13}{'fds/in flight':>14}{'load':>6}"
    )
    for r in results:
        if not r.cpu_main_s:
            continue
        mb = (r.peak_main_mb + r.peak_servers_mb) / r.level
        print(
            f"{r.leg:<12}{r.level:>10}{r.cpu_main_s / r.episodes:>9.3f}"
            f"{r.cpu_servers_s / r.episodes:>8.3f}{mb:>13.2f}"
            f"{r.peak_fds / r.level:>14.2f}{r.load:>6.1f}"
        )
    for ours, floor, raw in _rounds(results):
        limit = 1 / (1 / _rate(floor) + 1 / _rate(raw))
        print(
            f"additive limit @ {ours.level}: {limit:.1f} episodes/s "
            f"(floor {_rate(floor):.1f}, raw {_rate(raw):.1f}); vf04 "
            f"{_rate(ours):.1f} = {_rate(ours) / limit:.2f} of it"
        )


def _rate(result: LegResult) -> float:
    return result.ok / result.wall_s if result.wall_s else 0.0


def _rounds(
    results: list[LegResult],
) -> list[tuple[LegResult, LegResult, LegResult]]:
    """Each `vf04` leg with the `floor` and `raw` legs of its level that ran after
    it and before that level's next `vf04` leg (`--levels 512,512` runs two)."""
    rounds = []
    for i, ours in enumerate(results):
        if ours.leg != "vf04" or not _rate(ours):
            continue
        mates: dict[str, LegResult] = {}
        for later in results[i + 1 :]:
            if later.level != ours.level:
                continue
            if later.leg == "vf04":
                break
            mates.setdefault(later.leg, later)
        floor, raw = mates.get("floor"), mates.get("raw")
        if floor and raw and _rate(floor) and _rate(raw):
            rounds.append((ours, floor, raw))
    return rounds


def print_series(result: LegResult) -> None:
    print(f"\nsoak: {result.leg} at {result.level} in flight, every 100 episodes")
    print(
        f"{'episodes':>9}{'main MB':>9}{'fds':>6}{'threads':>8}"
        f"{'servers MB':>11}{'fds':>6}{'threads':>8}{'servers':>8}"
    )
    for s in result.series:
        print(
            f"{s.episodes:>9}{s.main_rss_mb:>9.0f}{s.main_fds:>6}{s.main_threads:>8}"
            f"{s.servers_rss_mb:>11.0f}{s.servers_fds:>6}{s.servers_threads:>8}"
            f"{s.servers:>8}"
        )
