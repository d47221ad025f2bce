"""Training health: reward, format and search collapse, lost format, empty searches, gibberish and repetition, read
from the metrics the trainer logs.

GRPO runs of search agents can collapse after a few hundred steps (Search-R1 reports it): the reward falls and stays
down, the answer format is lost, or the model emits garbage. `HealthCallback` watches the logged metrics and, with
simple rules over rolling means of the last `health_window` logged steps, says so as soon as it is clear:

    reward collapse   the rolling mean of `reward` is `health_reward_drop` below the best rolling mean of the run
    format collapse   the rolling mean of `search/format_ok_rate` fell below `health_min_format_rate` after having
                      reached it (an untrained policy that never had the format is not a collapse)
    gibberish         the rolling mean of `search/garbled_rate` (samples whose own text `looks_garbled`) is above
                      `health_max_garbled_rate`
    repetition        the rolling mean of `search/repeat_ratio` (repeated token 4-grams in the sampled text) is above
                      `health_max_repeat_ratio`
    search collapse   the mean of `search/searches_per_sample` over the last 4 logged steps (or `health_window`, if
                      smaller) fell below `health_min_searches` after having reached it: the policy answers without
                      searching, which on questions it cannot know means guessing (issue 10's most common failure
                      on a CPU). A level near zero cannot be noise, so this rule needs no long window and also judges
                      runs of a few dozen steps, which the other rules' 20-step windows never fill.
    format lost       the mean of `search/format_ok_rate` over the last 4 logged steps (or `health_window`) fell to
                      `health_lost_format_rate` or below after a window above it: no sampled rollout is well formed
                      any more, so every rollout earns the format penalty, every group's rewards are equal, and a
                      group-relative estimator has nothing to learn the format back from. It catches what format
                      collapse cannot: a cold start whose samples were well formed a quarter of the time never
                      reaches that rule's 0.5 (ablate_algorithm's cpu profile, RLOO seed 0: 0.25, then 0.00 from
                      its second step). Like search collapse, a level near zero needs no long window.
    empty searches    over the last 4 logged steps (or `health_window`), more than `health_max_empty_searches` of the
                      searches were answered with no document (`search/empty_results` per `search/searches_per_sample`,
                      judged while the policy still makes `health_min_searches`). The policy keeps the search a format
                      asks for but sends a query that finds nothing (a stop word: ablate_evidence's cpu profile, seed 2,
                      searched "and" on 79 of 100 held-out questions), so the searches count looks healthy while no
                      evidence comes back; or the retriever returns nothing at all. Ordinary runs of this project stay
                      under 0.5.

Rolling means of whole windows make the rules robust to the noise of single batches. Each alarm is raised once
when its rule starts to hold (and again only after it has cleared): as a `HealthWarning`, as a line for the run's
log (`sink`), and in a JSON record (`health.json` in the trainer's output folder). With `health_action: stop` the
first alarm stops training, and the record names the last good checkpoint to roll back to: the newest one saved
while no alarm was active and before the window that raised the alarm began (`rollback_checkpoint`).

The garble and repetition rates are logged by the trainer through `garble_metrics`; without them those two rules
stay idle.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchrl.protocols.base import looks_garbled

if TYPE_CHECKING:
    HealthCallback: type  # built on first use by the module's __getattr__ (below)
from searchrl.config.health import HealthConfig

__all__ = ["FORMAT_KEY", "GARBLED_KEY", "REPEAT_KEY", "REWARD_KEY", "SEARCH_KEY", "Alarm", "HealthMonitor", "HealthWarning", "alarms_in_history", "garble_metrics", "repeat_ratio", "rollback_checkpoint"]


REWARD_KEY = "reward"


FORMAT_KEY = "search/format_ok_rate"


GARBLED_KEY = "search/garbled_rate"


REPEAT_KEY = "search/repeat_ratio"


SEARCH_KEY = "search/searches_per_sample"


EMPTY_KEY = "search/empty_results"  # searches per sample that the retriever answered with no document


SHORT_WINDOW = 4  # logged steps the search-collapse, format-lost and empty-search rules average (<= health_window)


SHORT_FORMAT = "short format"  # the format-lost rule's window: FORMAT_KEY over SHORT_WINDOW steps


# The window whose start an alarm of each rule names (the window that raised it)
_RULE_WINDOWS = {"reward collapse": REWARD_KEY, "format collapse": FORMAT_KEY, "gibberish": GARBLED_KEY,
                 "repetition": REPEAT_KEY, "search collapse": SEARCH_KEY, "format lost": SHORT_FORMAT,
                 "empty searches": EMPTY_KEY}


RECORD_NAME = "health.json"


_NGRAM = 4  # token n-grams counted by repeat_ratio


class HealthWarning(UserWarning):
    """A training run looks collapsed."""


def repeat_ratio(token_ids: Sequence[int], n: int = _NGRAM) -> float:
    """Share of the token n-grams of one sample that repeat an earlier one (0: none repeats; a loop nears 1)."""
    grams = [tuple(token_ids[i: i + n]) for i in range(len(token_ids) - n + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def garble_metrics(trajectories: Sequence[Any], tokenizer) -> dict[str, float]:
    """`search/garbled_rate` and `search/repeat_ratio` of a batch of rollouts (objects with `completion_ids` and
    `env_mask`), judged on the tokens the model sampled only: retrieved passages are not the model's text."""
    own = [[t for t, m in zip(traj.completion_ids, traj.env_mask) if m] for traj in trajectories]
    n = max(len(own), 1)
    texts = tokenizer.batch_decode(own, skip_special_tokens=True) if own else []
    return {GARBLED_KEY: sum(map(looks_garbled, texts)) / n, REPEAT_KEY: sum(map(repeat_ratio, own)) / n}


@dataclass
class Alarm:
    """One rule starting to hold: at which logged step, over which window, and what it saw."""

    rule: str
    step: int
    window_start: int
    value: float
    message: str

    def line(self) -> str:
        return f"health: {self.rule} at step {self.step}: {self.message}"


@dataclass
class _Window:
    """The last `size` values of one metric with their steps."""

    size: int
    values: deque = field(default_factory=deque)

    def add(self, step: int, value: float) -> float | None:
        """Add a value; the window's mean once it is full, else None."""
        self.values.append((step, value))
        if len(self.values) > self.size:
            self.values.popleft()
        return sum(v for _, v in self.values) / self.size if len(self.values) == self.size else None

    @property
    def start(self) -> int:
        return self.values[0][0]


class HealthMonitor:
    """The collapse rules over a stream of logged metric dicts (no transformers needed; `HealthCallback` wraps it).

    `observe(step, logs)` returns the alarms that start at this step; `active` holds the rules currently alarming.
    """

    def __init__(self, cfg: HealthConfig):
        self.cfg = cfg
        keys = (REWARD_KEY, FORMAT_KEY, GARBLED_KEY, REPEAT_KEY)
        self.windows = {key: _Window(cfg.health_window) for key in keys}
        self.windows[SEARCH_KEY] = _Window(min(cfg.health_window, SHORT_WINDOW))
        self.windows[SHORT_FORMAT] = _Window(min(cfg.health_window, SHORT_WINDOW))
        self.windows[EMPTY_KEY] = _Window(min(cfg.health_window, SHORT_WINDOW))
        self.metrics = {SHORT_FORMAT: FORMAT_KEY}  # windows named otherwise than the metric they average
        self.format_was_above = False  # some short window's format rate was above health_lost_format_rate
        self.best_reward = -math.inf
        self.reached: set[str] = set()  # floor rules whose level the run has reached (format, searches)
        self.active: dict[str, Alarm] = {}
        self.alarms: list[Alarm] = []
        self.seen: set[str] = set()
        self.last_step = 0

    def observe(self, step: int, logs: Mapping[str, Any]) -> list[Alarm]:
        """Feed one logged dict (TRL's training logs; evaluation logs, prefixed eval_, are ignored)."""
        self.last_step = max(self.last_step, step)
        means = {}
        for name, window in self.windows.items():
            metric = self.metrics.get(name, name)
            value = logs.get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.seen.add(metric)
                mean = window.add(step, float(value))
                if mean is not None:
                    means[name] = mean
        holding: dict[str, tuple[float, str]] = {}
        cleared: set[str] = set()
        self._reward_rule(means, holding, cleared)
        self._format_rule(means, holding, cleared)
        self._search_rule(means, holding, cleared)
        self._format_lost_rule(means, holding, cleared)
        self._empty_search_rule(means, holding, cleared)
        for rule, key, limit, what in (("gibberish", GARBLED_KEY, self.cfg.health_max_garbled_rate, "garbled"),
                                       ("repetition", REPEAT_KEY, self.cfg.health_max_repeat_ratio, "repeated")):
            if key in means and limit < 1:
                if means[key] > limit:
                    message = (f"{means[key]:.3f} of the sampled text is {what} ({key}, mean of the last "
                               f"{self.cfg.health_window} logged steps; limit {limit:g})")
                    holding[rule] = (means[key], message)
                else:
                    cleared.add(rule)
        for rule in cleared:
            self.active.pop(rule, None)
        new = []
        for rule, (value, message) in holding.items():
            if rule in self.active:
                continue
            alarm = Alarm(rule, step, self.windows[_RULE_WINDOWS[rule]].start, value, message)
            self.active[rule] = alarm
            self.alarms.append(alarm)
            new.append(alarm)
        return new

    def _reward_rule(self, means: dict, holding: dict, cleared: set) -> None:
        drop = self.cfg.health_reward_drop
        if REWARD_KEY not in means or drop <= 0:
            return
        mean = means[REWARD_KEY]
        self.best_reward = max(self.best_reward, mean)
        fallen = self.best_reward - mean
        if fallen >= drop:
            holding["reward collapse"] = (mean, (
                f"the mean reward of the last {self.cfg.health_window} logged steps is {mean:.3f}, "
                f"{fallen:.3f} below its best {self.best_reward:.3f} (limit {drop:g})"))
        elif fallen < drop / 2:  # clears only once clearly recovered, so noise at the edge does not re-alarm
            cleared.add("reward collapse")

    def _floor_rule(self, means: dict, holding: dict, cleared: set, rule: str, key: str, floor: float,
                    message: str) -> None:
        """`rule` holds while the rolling mean of `key` is below `floor`, once it has reached `floor` (a policy that
        never had the behaviour has not lost it); `message` is formatted with the mean."""
        if key not in means or floor <= 0:
            return
        mean = means[key]
        if mean >= floor:
            self.reached.add(rule)
            cleared.add(rule)
        elif rule in self.reached:
            holding[rule] = (mean, message.format(mean=mean))

    def _format_rule(self, means: dict, holding: dict, cleared: set) -> None:
        floor = self.cfg.health_min_format_rate
        self._floor_rule(means, holding, cleared, "format collapse", FORMAT_KEY, floor, (
            f"the well-formed share of samples over the last {self.cfg.health_window} logged steps fell to "
            f"{{mean:.3f}}, below {floor:g}, which it had reached"))

    def _search_rule(self, means: dict, holding: dict, cleared: set) -> None:
        floor = self.cfg.health_min_searches
        self._floor_rule(means, holding, cleared, "search collapse", SEARCH_KEY, floor, (
            f"the policy has nearly stopped searching: {{mean:.3f}} searches per sample over the last "
            f"{self.windows[SEARCH_KEY].size} logged steps, below {floor:g}; its answers are now guesses (on a "
            f"synthetic world) or recall"))

    def _format_lost_rule(self, means: dict, holding: dict, cleared: set) -> None:
        # Not a _floor_rule: "reached" there means at or above the floor, and a floor of 0 there means off, while
        # here the level is at or near 0 and it is "above" that must come first.
        level = self.cfg.health_lost_format_rate
        if SHORT_FORMAT not in means or level < 0:
            return
        mean = means[SHORT_FORMAT]
        if mean > level:
            self.format_was_above = True
            cleared.add("format lost")
        elif self.format_was_above:
            holding["format lost"] = (mean, (
                f"no sampled rollout keeps the format: {mean:.3f} well formed over the last "
                f"{self.windows[SHORT_FORMAT].size} logged steps (at most {level:g}), after more before; every rollout now "
                f"earns the format penalty, so groups have no spread and the format cannot be learned back"))

    def _empty_search_rule(self, means: dict, holding: dict, cleared: set) -> None:
        # The two short windows cover the same steps (both metrics are logged every step), so the ratio of their
        # means is the share of that window's searches that came back empty.
        limit = self.cfg.health_max_empty_searches
        if EMPTY_KEY not in means or SEARCH_KEY not in means or limit >= 1:
            return
        searches = means[SEARCH_KEY]
        if searches <= 0 or searches < self.cfg.health_min_searches:  # too few searches to judge: search collapse's
            cleared.add("empty searches")
            return
        share = means[EMPTY_KEY] / searches
        if share > limit:
            holding["empty searches"] = (share, (
                f"{share:.2f} of the searches of the last {self.windows[EMPTY_KEY].size} logged steps found no "
                f"document (limit {limit:g}) while the policy still makes {searches:.2f} searches per sample: its "
                f"queries find nothing (e.g. a stop word), or the retriever returns nothing; the trajectories' "
                f"queries say which"))
        else:
            cleared.add("empty searches")


def alarms_in_history(rows: Iterable[Mapping[str, Any]], cfg: HealthConfig) -> list[Alarm]:
    """The alarms a run's training raised, replayed from its metrics history (`MetricsHistory` rows, or the records
    of `metrics.parquet`): what a folder shows when its health record is gone (it lives beside the checkpoints,
    which slim copies leave out). Each RL stage gets its own monitor, as each stage's trainer does."""
    monitors: dict[str, HealthMonitor] = {}
    alarms = []
    for row in sorted(rows, key=lambda r: r.get("step", 0)):
        monitor = monitors.setdefault(str(row.get("stage", "")), HealthMonitor(cfg))
        alarms.extend(monitor.observe(int(row.get("step", 0)), row))
    return alarms


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # a reader sees the old record or the new one, never half of it


def rollback_checkpoint(record: str | Path) -> Path | None:
    """The checkpoint folder to roll back to, from a health record (its path, or the trainer's output folder that
    holds health.json); None when the record names none or the folder is gone (save_total_limit may delete it)."""
    path = Path(record)
    if path.is_dir():
        path = path / RECORD_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no health record at {path}; was the run trained with HealthCallback?")
    good = json.loads(path.read_text(encoding="utf-8")).get("last_good_checkpoint")
    if not good or not Path(good["path"]).is_dir():
        return None
    return Path(good["path"])


class _Watch:
    """The callback's logic, independent of transformers: the monitor, checkpoints seen, the record, the actions."""

    def __init__(self, cfg: HealthConfig, sink: Callable[[str], None] | None):
        self.cfg, self.sink = cfg, sink
        self.monitor = HealthMonitor(cfg)
        self.checkpoints: list[dict[str, Any]] = []  # {"step", "path", "healthy"}
        self.stopped_at: int | None = None
        self.lines: list[str] = []

    def observe(self, step: int, logs: Mapping[str, Any]) -> list[Alarm]:
        if any(str(k).startswith("eval_") for k in logs):
            return []
        new = self.monitor.observe(step, logs)
        for alarm in new:
            line = alarm.line() + (" -- stopping training" if self.cfg.health_action == "stop" else "")
            self.lines.append(line)
            warnings.warn(line, HealthWarning, stacklevel=2)
            if self.sink is not None:
                self.sink(line)
        if new and self.cfg.health_action == "stop" and self.stopped_at is None:
            self.stopped_at = step
        return new

    def record_path(self, output_dir: str) -> Path:
        return Path(self.cfg.health_record) if self.cfg.health_record else Path(output_dir) / RECORD_NAME

    def restore_checkpoints(self, output_dir: str, up_to_step: int) -> None:
        """Take over the checkpoints an earlier record judged, when a run resumes from step `up_to_step`."""
        path = self.record_path(output_dir)
        if up_to_step <= 0 or not path.is_file():
            return
        try:
            earlier = json.loads(path.read_text(encoding="utf-8")).get("checkpoints", [])
        except json.JSONDecodeError:
            return
        self.checkpoints = [c for c in earlier if c.get("step", math.inf) <= up_to_step]

    def saved(self, step: int, path: str) -> None:
        self.checkpoints.append({"step": step, "path": path, "healthy": not self.monitor.active})

    def last_good_checkpoint(self) -> dict[str, Any] | None:
        """The newest checkpoint saved with no alarm active and before the window of every active alarm began."""
        limit = min((a.window_start for a in self.monitor.active.values()), default=math.inf)
        good = [c for c in self.checkpoints if c["healthy"] and c["step"] < limit]
        return {"step": good[-1]["step"], "path": good[-1]["path"]} if good else None

    def record(self) -> dict[str, Any]:
        status = "stopped" if self.stopped_at is not None else ("warned" if self.monitor.alarms else "healthy")
        return {
            "status": status,
            "step": self.monitor.last_step,
            "active": sorted(self.monitor.active),
            "alarms": [asdict(a) for a in self.monitor.alarms],
            "last_good_checkpoint": self.last_good_checkpoint(),
            "checkpoints": self.checkpoints,
            "signals": sorted(self.monitor.seen),
            "settings": {name: getattr(self.cfg, name) for name in HealthConfig.__dataclass_fields__},
        }

    def write(self, output_dir: str) -> Path:
        path = self.record_path(output_dir)
        _write_json(path, self.record())
        return path


def _callback_class():
    from transformers import TrainerCallback

    class HealthCallback(TrainerCallback):
        """Watches each logged step for the collapse rules of the module docstring.

        `cfg` is a `HealthConfig` (or a RunConfig, which is one); `sink` receives each alarm's line (e.g. `print`).
        Every process runs the rules on the same gathered metrics, so with `health_action: stop` all of them stop
        together; only the main process writes the record.
        """

        def __init__(self, cfg: HealthConfig, sink: Callable[[str], None] | None = None):
            self.watch = _Watch(cfg, sink)

        @property
        def alarms(self) -> list[Alarm]:
            return self.watch.monitor.alarms

        @property
        def lines(self) -> list[str]:
            return self.watch.lines

        @property
        def stopped_at(self) -> int | None:
            """The step at which this callback stopped training (health_action: stop), else None."""
            return self.watch.stopped_at

        def on_train_begin(self, args, state, control, **kwargs):
            # A resumed run restores its log history: replay it so the windows and the best reward carry over, and
            # keep the checkpoints its record judged (up to the step it resumes from).
            if self.watch.cfg.health_action == "off":
                return
            self.watch.restore_checkpoints(args.output_dir, state.global_step)
            for entry in state.log_history:
                if "step" in entry and entry["step"] > self.watch.monitor.last_step:
                    self.watch.monitor.observe(int(entry["step"]), entry)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.watch.cfg.health_action == "off" or not logs:
                return
            if self.watch.observe(state.global_step, logs):
                if self.watch.cfg.health_action == "stop":
                    control.should_training_stop = True
                if state.is_world_process_zero:
                    self.watch.write(args.output_dir)

        def on_save(self, args, state, control, **kwargs):
            if self.watch.cfg.health_action == "off":
                return
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            self.watch.saved(state.global_step, path)
            if state.is_world_process_zero:
                self.watch.write(args.output_dir)

        def on_train_end(self, args, state, control, **kwargs):
            if self.watch.cfg.health_action != "off" and state.is_world_process_zero:
                self.watch.write(args.output_dir)

    return HealthCallback


def __getattr__(name: str):
    # The callback subclasses transformers' TrainerCallback; building it on first use keeps this module (and the
    # RunConfig that inherits HealthConfig) free of the transformers import.
    if name == "HealthCallback":
        cls = _callback_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
