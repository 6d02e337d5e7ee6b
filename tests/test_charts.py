"""fairseq_acvi/charts.py: a report's chart written with a palette is smaller than matplotlib's PNG
and the same picture to the eye; a picture with transparent pixels, or one a palette would not
make smaller, is written as it was."""
import io

import numpy as np
import pytest

from fairseq_acvi.charts import save_chart, shrink_png

plt = pytest.importorskip("matplotlib.pyplot")
from PIL import Image  # noqa: E402  (matplotlib's dependency)


def _pixels(data_or_path):
    src = io.BytesIO(data_or_path) if isinstance(data_or_path, bytes) else data_or_path
    return np.asarray(Image.open(src).convert("RGB"), dtype=int)


def test_a_chart_is_written_smaller_and_looks_the_same(tmp_path):
    fig, ax = plt.subplots(figsize=(5, 3))
    x = np.linspace(0, 20, 200)
    for k in range(6):
        ax.plot(x, np.exp(-x / (k + 1)) + 0.1 * k, marker="o", markevery=20, label=f"run {k}")
    ax.set_yscale("log")
    ax.legend(fontsize=6)
    plain = io.BytesIO()
    fig.savefig(plain, format="png", dpi=110)
    path = save_chart(fig, str(tmp_path / "c.png"), dpi=110)
    plt.close(fig)
    written = (tmp_path / "c.png").read_bytes()
    assert path == str(tmp_path / "c.png") and Image.open(path).mode == "P"
    assert len(written) < 0.6 * plain.tell()
    before, after = _pixels(plain.getvalue()), _pixels(path)
    assert before.shape == after.shape
    diff = np.abs(before - after)
    assert diff.mean() < 1.0 and np.mean(diff.max(axis=2) > 16) < 0.01


def test_a_picture_with_transparent_pixels_is_kept_as_it_was():
    rgba = np.zeros((64, 64, 4), dtype=np.uint8)
    rgba[:32] = (200, 30, 30, 255)                     # top half opaque red, bottom transparent
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, format="PNG")
    assert shrink_png(buf.getvalue()) == buf.getvalue()
    rgba[32:, :, 3] = 255                              # opaque everywhere: a palette of two colours
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, format="PNG")
    out = shrink_png(buf.getvalue())
    assert len(out) < buf.tell() and Image.open(io.BytesIO(out)).mode == "P"
    assert (_pixels(out) == rgba[..., :3]).all()


def test_a_picture_a_palette_would_not_shrink_is_kept_as_it_was():
    noise = np.random.default_rng(0).integers(0, 256, size=(64, 64), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise, "L").save(buf, format="PNG")
    assert shrink_png(buf.getvalue()) == buf.getvalue()
