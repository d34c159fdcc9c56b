"""The cards' charts, drawn by matplotlib: nothing covers the data, nothing leaves the image, gaps where a
metric diverged, the same bytes from the child process a push draws them in, and a push's own
interpreter never importing matplotlib."""

from __future__ import annotations

import io
import itertools
import json
import math
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PIL import Image

from hubkit.cards import ChartsDrawnAhead, figures, plots
from hubkit.cards.chart_process import draw_in_child
from hubkit.cards.metrics import key_metric_series
from hubkit.evaluate.results import (
    Contamination,
    EvalSummary,
    GenerationInfo,
    MetricInfo,
    ModelResult,
    ProblemsInfo,
    save_eval,
)
from hubkit.manifest import Manifest
from hubkit.runs.model import Metrics, Run

REPO_ROOT = Path(__file__).resolve().parents[1]
BLUE = (0x00, 0x72, 0xB2)  # plots.CURVE_COLORS[0]
STEPS = tuple(range(1, 201))
PUBLISHED = tuple(range(20, 201, 20))


def _curve(label: str, f, noise: float = 0.03, seed: int = 0) -> plots.Curve:
    generator = random.Random(seed)
    return plots.Curve(label, tuple((s, f(s) + generator.gauss(0, noise)) for s in STEPS))


def _reward_chart() -> plots.Chart:
    """The reward and three components over 200 steps, as TRL logs them: the chart whose legend covered the
    curves when it was drawn in a corner of the plot."""
    return plots.Chart(
        "assets/reward.png",
        "Reward",
        "mean reward",
        (
            _curve("reward (mean) [reward]", lambda s: 0.15 + 0.7 * (1 - math.exp(-s / 50))),
            _curve(
                "correctness [rewards/correctness/mean]",
                lambda s: 0.1 + 0.6 * (1 - math.exp(-s / 60)),
                seed=1,
            ),
            _curve("format [rewards/format/mean]", lambda s: 0.3 + 0.65 * (1 - math.exp(-s / 20)), seed=2),
            _curve("length penalty [rewards/length_penalty/mean]", lambda s: -0.2 + 0.15 * s / 200, seed=3),
        ),
        PUBLISHED,
    )


def _seven_curves() -> plots.Chart:
    curves = tuple(
        _curve(
            f"component number {i} with a long name [rewards/component_number_{i}/mean]",
            lambda s: s / 200,
            seed=i,
        )
        for i in range(7)
    )
    return plots.Chart("assets/reward.png", "Reward", "mean reward", curves, PUBLISHED)


def _model(step: int | None, accuracy: float, tokens: float, n: int = 200) -> ModelResult:
    return ModelResult(
        name="base" if step is None else f"global_step_{step}",
        step=step,
        n=n,
        correct=round(accuracy * n),
        accuracy=accuracy,
        ci95=(max(0.0, accuracy - 0.06), min(1.0, accuracy + 0.06)),
        tokens_mean=tokens,
        tokens_median=tokens,
        tokens_max=int(2 * tokens),
        truncated_share=0.0,
    )


def _summary(models: list[ModelResult]) -> EvalSummary:
    return EvalSummary(
        run_id="charts",
        created_at="2026-03-01T12:00:00Z",
        metric=MetricInfo("gsm8k_correctness", "the last number of the <answer> block equals the reference"),
        problems=ProblemsInfo(
            source="openai/gsm8k",
            split="test",
            revision="main",
            n=models[0].n,
            sha256="ab" * 32,
            contamination=Contamination(checked=True, overlap=0, train_problems=5),
        ),
        generation=GenerationInfo(
            backend="transformers",
            max_new_tokens=256,
            temperature=0.0,
            top_p=1.0,
            do_sample=False,
            seed=0,
            batch_size=8,
            chat_template="{{ messages }}",
            system_prompt=None,
        ),
        models=tuple(models),
    )


def _crowded_summary() -> EvalSummary:
    """Ten checkpoints, most within a few tokens and points of each other, two of them at one point, the
    last at the right edge: the chart whose labels overlapped and ran off the image ("step 40, step 6…")."""
    checkpoints = [
        (20, 0.42, 228.0),
        (40, 0.55, 201.0),
        (60, 0.55, 201.0),
        (80, 0.58, 199.0),
        (100, 0.60, 196.5),
        (120, 0.61, 197.2),
        (140, 0.62, 195.0),
        (160, 0.62, 194.8),
        (180, 0.63, 193.9),
        (200, 0.63, 243.0),
    ]
    return _summary([_model(None, 0.31, 240.0)] + [_model(*c) for c in checkpoints])


def _image(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def _column(figure, image: Image.Image, step: float) -> set[tuple[int, int, int]]:
    """The colours of the image's pixel column at `step`, inside the plot."""
    (axes,) = [a for a in figure.axes if a.get_label() != "<colorbar>"]
    x, _ = axes.transData.transform((step, 0))
    box = axes.get_window_extent()
    return {
        image.getpixel((round(x), round(image.height - y))) for y in range(int(box.y0) + 2, int(box.y1) - 2)
    }


# --- nothing over the data, nothing off the image --------------------------------------------------------


@pytest.mark.parametrize("chart", [_reward_chart(), _seven_curves()], ids=["reward", "seven-curves"])
def test_the_legend_covers_no_data_point(chart):
    figure = figures.figure(chart)
    (axes,) = figure.axes
    (legend,) = figure.legends
    box = legend.get_window_extent()
    assert not box.overlaps(axes.get_window_extent())  # outside the plot, where no data is drawn
    for curve in chart.curves:
        for x, y in axes.transData.transform(curve.points):
            assert not box.contains(x, y), (curve.label, x, y)
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["published checkpoint", *(c.label for c in chart.curves)]


@pytest.mark.parametrize(
    "chart",
    [_reward_chart(), _seven_curves(), plots.accuracy_chart(_crowded_summary())],
    ids=["reward", "seven-curves", "accuracy"],
)
def test_every_label_lies_inside_the_image(chart):
    """Every drawn thing (each plot with its ticks, title and axis labels; the colour bar; the legend; each
    point's label) inside the figure, and the PNG's outermost pixels all white: nothing runs off it."""
    figure = figures.figure(chart)
    image = figure.bbox
    boxes = [
        *(axes.get_tightbbox() for axes in figure.axes),
        *(legend.get_window_extent() for legend in figure.legends),
        *(text.get_window_extent() for axes in figure.axes for text in axes.texts),
    ]
    assert len(boxes) >= 2
    for box in boxes:
        inside = image.x0 <= box.x0 and box.x1 <= image.x1 and image.y0 <= box.y0 and box.y1 <= image.y1
        assert inside, (box.extents, image.extents)
    png = _image(figures.png(chart))
    width, height = png.size
    edge = [(x, y) for x in range(width) for y in (0, height - 1)] + [
        (x, y) for y in range(height) for x in (0, width - 1)
    ]
    assert {png.getpixel(xy) for xy in edge} == {(255, 255, 255)}


def test_point_labels_overlap_no_other_label_and_no_point():
    chart = plots.accuracy_chart(_crowded_summary())
    figure = figures.figure(chart)
    (axes,) = [a for a in figure.axes if a.get_label() != "<colorbar>"]
    labels = [t for t in axes.texts if t.get_text()]
    boxes = [t.get_window_extent() for t in labels]
    plot = axes.get_window_extent()
    for text, box in zip(labels, boxes, strict=True):
        assert plot.x0 <= box.x0 and box.x1 <= plot.x1 and plot.y0 <= box.y0 and box.y1 <= plot.y1, text
        for x, y in axes.transData.transform([(p.tokens_mean, p.accuracy) for p in chart.points]):
            assert not box.contains(x, y), (text.get_text(), x, y)
    for (a, box_a), (b, box_b) in itertools.combinations(zip(labels, boxes, strict=True), 2):
        assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())
    names = {t.get_text() for t in labels}
    assert {"base", "step 200", "step 20"} <= names  # the base and the newest come first; a lone one fits
    assert "steps 40, 60" in names  # two checkpoints at one point share one label


def test_every_point_is_labelled_where_there_is_room():
    summary = _summary([_model(None, 0.25, 40.0, 4), _model(1, 1.0, 21.5, 4), _model(3, 1.0, 21.5, 4)])
    figure = figures.figure(plots.accuracy_chart(summary))
    assert sorted(t.get_text() for t in figure.axes[0].texts) == ["base", "steps 1, 3"]
    many = _summary(
        [_model(None, 0.3, 300.0)] + [_model(s, 0.3 + s / 1000, 300.0 - s) for s in (50, 100, 150, 200)]
    )
    figure = figures.figure(plots.accuracy_chart(many))
    assert sorted(t.get_text() for t in figure.axes[0].texts) == [
        "base",
        "step 100",
        "step 150",
        "step 200",
        "step 50",
    ]


# --- what the PNG shows ----------------------------------------------------------------------------------


def test_a_drawn_chart_is_the_png_the_card_shows():
    """Its size, white background, curve colour and dashed checkpoint lines (both drawn and gaps)."""
    curve = plots.Curve("reward [reward]", tuple((s, math.log(s)) for s in range(1, 101)))
    chart = plots.Chart("assets/reward.png", "Reward", "reward", (curve,), (50,))
    image = _image(figures.png(chart))
    assert image.size == (700, 360)
    assert image.getpixel((2, 2)) == (255, 255, 255)
    column = _column(figures.figure(chart), image, 50)
    assert any(max(p) < 0xD8 and max(p) - min(p) < 8 for p in column)  # the line's gray
    assert (255, 255, 255) in column  # and its gaps
    assert BLUE in set(image.getdata())


def test_a_nan_or_infinite_value_leaves_a_gap_and_does_not_stretch_the_axis():
    """A diverged step logs NaN (or inf): the curve is drawn around it, on the axis of the finite values; a
    finite value alone between two gaps still shows, as a dot."""
    points = tuple(
        (s, math.nan if s in (40, 41, 79, 81) else (math.inf if s == 70 else s / 100)) for s in range(1, 101)
    )
    chart = plots.Chart("assets/kl.png", "KL", "KL", (plots.Curve("kl [kl]", points),), ())
    figure = figures.figure(chart)
    low, high = figure.axes[0].get_ylim()
    assert -0.1 < low < 0.01 and 1.0 < high < 1.1
    image = _image(figures.png(chart))
    for step in (20, 60, 80, 90):
        assert BLUE in _column(figure, image, step), step
    assert BLUE not in _column(figure, image, 40.5)  # the gap between steps 39 and 42


def test_a_chart_needs_one_to_seven_curves():
    curve = plots.Curve("reward [reward]", ((1, 0.5),))
    with pytest.raises(ValueError, match="0 curves"):
        figures.png(plots.Chart("assets/reward.png", "Reward", "reward", (), (1,)))
    with pytest.raises(ValueError, match="8 curves"):
        figures.png(plots.Chart("assets/reward.png", "Reward", "reward", (curve,) * 8, (1,)))


# --- drawn in a child process ----------------------------------------------------------------------------


def test_the_child_process_draws_the_same_bytes_as_this_one():
    charts = [_reward_chart(), plots.accuracy_chart(_crowded_summary())]
    assert draw_in_child(charts).result() == tuple(figures.png(chart) for chart in charts)
    assert draw_in_child([]).result() == ()


def test_a_failing_child_says_why():
    with pytest.raises(RuntimeError, match=r"exit 1(.|\n)*ValueError: assets/reward.png: 0 curves"):
        draw_in_child([plots.Chart("assets/reward.png", "Reward", "reward", (), (1,))]).result()


def _evaluated_run(tmp_path: Path) -> Run:
    manifest = Manifest(run_id="charts-run", framework="trl", base_model="hubkit-test/tiny-qwen3")
    rows = [
        {"reward": 0.1 * s, "completions/mean_length": 100.0 + s, "grad_norm": 1.0 + s} for s in range(1, 6)
    ]
    save_eval(tmp_path, _summary([_model(None, 0.3, 120.0), _model(2, 0.5, 100.0), _model(4, 0.6, 90.0)]), [])
    return Run(tmp_path, manifest, (), (), Metrics.from_entries(list(enumerate(rows, start=1))), True)


def test_charts_drawn_ahead_are_the_training_charts_and_the_evaluation(tmp_path: Path):
    run = _evaluated_run(tmp_path)
    images = ChartsDrawnAhead(run, (2, 4)).images()
    (summary_chart,) = [c for c in images if isinstance(c, plots.AccuracyChart)]
    expected = (*plots.training_charts(key_metric_series(run), (2, 4)), summary_chart)
    assert tuple(images) == expected
    assert [c.path for c in expected] == [
        "assets/reward.png",
        "assets/response_length.png",
        "assets/grad_norm.png",
        "assets/accuracy_vs_length.png",
    ]
    assert [p.step for p in summary_chart.points] == [None, 2, 4]
    assert all(images[chart] == figures.png(chart) for chart in expected)
    (tmp_path / "eval" / "results.json").write_text("{not json")  # the push's own load of it says so
    assert [c.path for c in ChartsDrawnAhead(run, (2, 4)).images()] == [c.path for c in expected[:-1]]


def test_a_push_that_draws_its_charts_ahead_never_imports_matplotlib(tmp_path: Path):
    run = _evaluated_run(tmp_path)
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from hubkit.cards import ChartsDrawnAhead
        from hubkit.runs.model import Metrics, Run
        from hubkit.manifest import Manifest
        rows = json.loads({json.dumps(json.dumps([[r.step, r.values] for r in run.metrics.rows]))})
        metrics = Metrics.from_entries([(step, values) for step, values in rows])
        manifest = Manifest(run_id="charts-run", framework="trl", base_model="hubkit-test/tiny-qwen3")
        run = Run(Path({str(tmp_path)!r}), manifest, (), (), metrics, True)
        images = ChartsDrawnAhead(run, (2, 4)).images()
        print(len(images), all(png.startswith(b"\\x89PNG") for png in images.values()))
        print(sorted(name for name in sys.modules if name.split(".")[0] == "matplotlib"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.splitlines() == ["4 True", "[]"], done.stderr
